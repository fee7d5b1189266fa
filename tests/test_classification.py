"""Image-level training: ImageFolder data, the classifier task model, top-k accuracy, layer-wise lr decay, and a
short CPU run on patches of real CamVid images that beats predicting the majority class."""
import math
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.optim import build_optim_wrapper
from mmengine.structures import BaseDataElement

from heads.datasets import ImageFolderDataset
from heads.metrics import AccuracyMetric
from heads.models import ImageClassifier
from heads.registry import MODELS

from .reference import shared_data
from .training_logs import logged

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
import make_patch_dataset  # noqa: E402
import train as train_tool  # noqa: E402

PIPELINE = [dict(type='LoadImage'), dict(type='PackDenseInputs')]


def image_folder(root: Path, counts: dict) -> Path:
    for name, count in counts.items():
        (root / 'train' / name).mkdir(parents=True)
        for i in range(count):
            cv2.imwrite(str(root / 'train' / name / f'{i}.png'), np.full((8, 8, 3), 10 * i, np.uint8))
    return root


def test_image_folder_labels_follow_the_class_order(tmp_path):
    root = image_folder(tmp_path, {'cat': 2, 'dog': 1})
    dataset = ImageFolderDataset(str(root), pipeline=PIPELINE)
    assert dataset.metainfo['classes'] == ('cat', 'dog') and len(dataset) == 3
    assert [dataset.get_data_info(i)['gt_label'] for i in range(3)] == [0, 0, 1]
    assert int(dataset[2]['data_samples'].gt_label) == 1
    named = ImageFolderDataset(str(root), classes=('dog', 'cat', 'bird'), pipeline=PIPELINE)  # bird: no folder
    assert [named.get_data_info(i)['gt_label'] for i in range(3)] == [0, 1, 1]


def test_image_folder_errors_name_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'nowhere/train does not exist.*ImageFolder'):
        ImageFolderDataset(str(tmp_path / 'nowhere'))
    (tmp_path / 'train' / 'empty_class').mkdir(parents=True)
    with pytest.raises(ValueError, match='holds no images'):
        ImageFolderDataset(str(tmp_path))


def test_top_k_accuracy_counts_labels_among_the_k_best_scores():
    torch.manual_seed(0)
    scores, labels = torch.rand(50, 7), torch.randint(0, 7, (50,))
    metric = AccuracyMetric(topk=(1, 3, 5))
    metric.process(None, [{'pred_score': s, 'gt_label': y} for s, y in zip(scores, labels)])
    result = metric.compute_metrics(metric.results)
    for k in (1, 3, 5):
        expected = 100 * (scores.topk(k, dim=1).indices == labels[:, None]).any(1).float().mean().item()
        assert result[f'top{k}'] == pytest.approx(expected)


def tiny_classifier(**kwargs):
    torch.manual_seed(0)
    return ImageClassifier(backbone=dict(name='vit_tiny_patch16_224', depth=4, img_size=32, patch_size=8),
                           num_classes=5, **kwargs)


def samples(labels=None, scores=None):
    out = []
    for i in range(len(labels if labels is not None else scores)):
        sample = BaseDataElement()
        if labels is not None:
            sample.gt_label = torch.tensor(labels[i])
        if scores is not None:
            sample.gt_score = scores[i]
        out.append(sample)
    return out


def test_classifier_loss_is_label_smoothed_cross_entropy():
    model, eps = tiny_classifier(label_smoothing=0.1), 0.1
    x, labels = torch.randn(3, 3, 32, 32), [0, 4, 2]
    log_p = model(x).log_softmax(-1)
    expected = -((1 - eps) * log_p[torch.arange(3), labels] + eps / 5 * log_p.sum(-1)).mean()
    torch.testing.assert_close(model(x, samples(labels), mode='loss')['loss_cls'], expected)
    mixed = torch.tensor([[0.7, 0.3, 0, 0, 0], [0, 0, 1.0, 0, 0], [0.2, 0, 0, 0, 0.8]])  # e.g. Mixup targets
    smoothed = (1 - eps) * mixed + eps / 5
    torch.testing.assert_close(model(x, samples(scores=mixed), mode='loss')['loss_cls'],
                               -(smoothed * log_p).sum(-1).mean())
    with pytest.raises(ValueError, match=r"labels \[7\] are outside the model's 5 classes"):
        model(x, samples([0, 7, 1]), mode='loss')


def test_prediction_scores_and_labels():
    model = tiny_classifier().eval()
    x = torch.randn(2, 3, 32, 32)
    out = model(x, samples([1, 2]), mode='predict')
    torch.testing.assert_close(torch.stack([s.pred_score for s in out]), model(x).softmax(-1))
    assert [int(s.pred_label) for s in out] == model(x).argmax(-1).tolist()


def lr_scales(model, backbone, rate=0.5):
    wrapper = build_optim_wrapper(model, dict(
        optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05), constructor='LayerDecayOptimWrapperConstructor',
        paramwise_cfg=dict(layer_decay_rate=rate, backbone=backbone)))
    return {g['name']: (g['lr'], g['weight_decay']) for g in wrapper.optimizer.param_groups}


def test_layer_decay_scales_each_block_by_depth():
    groups = lr_scales(tiny_classifier(), 'classifier')  # ViT with 4 blocks: L = 4, scale 0.5 ** (5 - layer)
    assert groups['classifier.patch_embed.proj.weight'] == (0.5 ** 5, 0.05)
    assert groups['classifier.prefix.cls'] == (0.5 ** 5, 0.0)  # no weight decay on tokens
    for i in range(4):
        assert groups[f'classifier.blocks.{i}.attn.qkv.weight'] == (0.5 ** (4 - i), 0.05)
        assert groups[f'classifier.blocks.{i}.norm1.weight'][1] == 0.0  # nor on norms and biases
    assert groups['classifier.norm.weight'][0] == 0.5  # registered after the last block: its layer
    assert groups['classifier.head.weight'] == (1.0, 0.05)


@pytest.mark.parametrize('name, overrides, blocks', [
    ('cvt_13_224', dict(depths=[1, 1, 2]), 4), ('coatnet_0_rw_224', dict(depths=[1, 1, 1, 1]), 4),
    ('crossvit_tiny_240', dict(depths=[[1, 1, 0], [1, 1, 0]], out_indices=[0, 0, 1, 1]), 2)])
def test_layer_decay_follows_depth_in_every_family_and_leaves_the_dense_head_alone(name, overrides, blocks):
    model = MODELS.build(dict(type='Segmentor', backbone=dict(type='ZooBackbone', name=name, **overrides),
                              neck=dict(type='DPTNeck', hidden_channels=(16, 16, 16, 16), fusion_channels=16),
                              decode_head=dict(type='DPTSegHead', num_classes=3, in_channels=16)))
    groups = lr_scales(model, 'backbone')
    backbone = [lr for key, (lr, _) in groups.items() if key.startswith('backbone.')]
    assert backbone == sorted(backbone)  # registration order is depth order: never decreasing
    assert math.isclose(backbone[0], 0.5 ** (blocks + 1)) and math.isclose(backbone[-1], 0.5)
    assert all(lr == 1.0 for key, (lr, _) in groups.items() if not key.startswith('backbone.'))


def test_short_run_on_camvid_patches_beats_the_majority_class(tmp_path, monkeypatch):
    """ViT-Ti (4 blocks, 8x8 patches) on 64x64 patches of every 6th CamVid image of each split (a patch is
    labelled by a class covering 75% of it): validation top-1 well above always answering the majority class."""
    monkeypatch.chdir(ROOT)
    counts = make_patch_dataset.main([str(shared_data('camvid')), str(tmp_path / 'patches'), '--size', '64',
                                      '--every', '6'])
    majority = 100 * max(counts['val'].values()) / sum(counts['val'].values())
    train_tool.main(['configs/cls_vitt_camvid_patches.py', '--data-root', str(tmp_path / 'patches'),
                     '--work-dir', str(tmp_path / 'work'), '--cfg-options', 'train_cfg.max_iters=150',
                     'train_cfg.val_interval=150', 'param_scheduler.1.end=150', 'default_hooks.checkpoint.interval=150'])
    _, metrics = logged(tmp_path / 'work')
    print(f"CamVid patches val top-1 {metrics['top1']:.1f} (majority class {majority:.1f}), top-5 {metrics['top5']:.1f}")
    assert metrics['top1'] > majority + 15
