"""tools/experiment.py (lab.experiments): the exercises run end to end, on a few scenes and iterations, and
write their table and plots; the LoRA exercise finds gradients on the adapter only."""
import json

import numpy as np
import pytest
import torch

from lab import experiments


def test_roughness_and_entropy_are_what_they_say():
    flat = torch.full((1, 4, 4), 1 / 16)
    entropy, roughness = experiments.entropy_and_roughness(flat)
    assert abs(entropy - torch.log(torch.tensor(16.0)).item()) < 1e-5 and roughness == 0.0
    spike = torch.zeros(1, 4, 4)
    spike[0, 1, 1] = 1.0
    entropy, roughness = experiments.entropy_and_roughness(spike)
    # 4 neighbour steps of 1 among 24, over the mean weight 1/16
    assert abs(entropy) < 1e-5 and abs(roughness - 4 / 24 * 16) < 1e-5


def majority_class_miou(train_labels: np.ndarray, val_labels: np.ndarray) -> float:
    """mIoU (%) over the classes present in ``val_labels`` of predicting the training set's most frequent class."""
    majority = np.bincount(train_labels.ravel()).argmax()
    present = np.unique(val_labels)
    return 100 * float(np.mean([(val_labels == majority).mean() if c == majority else 0.0 for c in present]))


def counted_miou(predictions: np.ndarray, labels: np.ndarray) -> float:
    """mIoU (%) over the classes present in ``labels``, counted pixel by pixel."""
    return 100 * float(np.mean([((predictions == c) & (labels == c)).sum() / ((predictions == c) | (labels == c)).sum()
                                for c in np.unique(labels)]))


ITERS, TRAIN, VAL = 16, 16, 8  # a trial: every variant 61-71 mIoU at 64x64 after 16 iterations; majority class 12.8


@pytest.mark.slow
def test_exercises_write_their_table_and_plots(tmp_path):
    results = experiments.run(tmp_path, exercises=('registers', 'lora', 'positions'), iters=ITERS,
                              train_count=TRAIN, val_count=VAL, log=lambda *_: None)
    assert results['lora']['only_adapters']
    assert results['lora']['with_gradient'] == ['backbone.blocks.1.attn.qkv.lora_a',
                                                'backbone.blocks.1.attn.qkv.lora_b']
    assert set(results['positions']) == {'learned', 'sincos', 'rope', 'alibi', 'none'}
    # every variant learned: well above predicting the training set's most frequent class everywhere
    train_labels = experiments.scenes(TRAIN, experiments.SIZE, seed=0)[1].numpy()
    bars = {size: 2 * majority_class_miou(train_labels, experiments.scenes(VAL, size, seed=1)[1].numpy())
            for size in (experiments.SIZE, experiments.LARGE)}
    assert min(bars.values()) > 20
    below = {name: r for name, r in results['positions'].items()
             if not (r['miou'] > bars[experiments.SIZE] and r['miou_large'] > bars[experiments.LARGE])}
    assert not below, f'under twice the majority-class mIoU {bars}: {below}'
    assert all(r['miou'] > bars[experiments.SIZE] for r in results['registers'].values()), results['registers']
    # the recorded figure is the mIoU of the model it names: the same run repeated, its pixels counted here
    torch.manual_seed(0)
    model = experiments.small_dpt(**experiments.POSITIONS['rope'])
    experiments.train(model, experiments.scenes(TRAIN, experiments.SIZE, seed=0), ITERS)
    images, labels = experiments.scenes(VAL, experiments.LARGE, seed=1)
    with torch.no_grad():
        predictions = model.eval().predict_tensor(images).argmax(1).numpy()
    counted = counted_miou(predictions, labels.numpy())
    assert abs(results['positions']['rope']['miou_large'] - counted) < 1e-6, (results['positions']['rope'], counted)
    assert json.loads((tmp_path / 'results.json').read_text()).keys() == results.keys()
    table = (tmp_path / 'results.md').read_text()
    assert f"| rope | {results['positions']['rope']['miou']:.1f} |" in table and '| 4 registers |' in table
    assert (tmp_path / 'positions_miou.png').stat().st_size > 0 and (tmp_path / 'registers_attention.png').exists()
