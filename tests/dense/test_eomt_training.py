"""EoMT trains under the project's runner (tools/train.py on configs/eomt_vitt4_camvid_cpu.py, made small: synthetic
scenes of 64x64): the loss over every block's predictions falls to finite values, the weights move, and
MaskAnnealingHook drives the blocks' masked-attention probabilities by the iteration (the paper's polynomial decay)."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from heads.datasets.synthetic import SYNTHETIC_CLASSES
from heads.models.eomt_parts import mask_probability

ROOT = Path(__file__).resolve().parents[2]


def synthetic():
    return dict(type='SyntheticScenes', num_samples=2, size=(64, 64), seed=0, serialize_data=False,
                pipeline=[dict(type='LoadImage'), dict(type='LoadAnnotations'), dict(type='PackDenseInputs')])


@pytest.mark.slow
def test_runner_trains_eomt_and_anneals_its_masks(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    import train as train_tool

    cfg = Config.fromfile(str(ROOT / 'configs' / 'eomt_vitt4_camvid_cpu.py'))
    cfg.model.num_classes = len(SYNTHETIC_CLASSES)
    cfg.model.backbone.update(img_size=64)
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[name].dataset = synthetic()
        cfg[name].batch_size = 2
    cfg.train_cfg.update(max_iters=4, val_interval=1000, val_begin=1000)
    cfg.param_scheduler = []
    cfg.default_hooks.checkpoint.update(interval=1000)
    cfg.default_hooks.logger.interval = 1
    # block 0 anneals over iterations 0-2, block 1 over 2-4
    cfg.custom_hooks = [dict(type='MaskAnnealingHook', windows=[(0.0, 0.5), (0.5, 1.0)])]
    cfg.visualizer = dict(type='Visualizer', vis_backends=None)
    cfg.dump(str(tmp_path / 'eomt.py'))
    torch.manual_seed(0)
    from heads.registry import MODELS
    initial = MODELS.build(cfg.model).state_dict()
    runner = train_tool.main([str(tmp_path / 'eomt.py'), '--work-dir', str(tmp_path / 'work')])
    model = runner.model
    # set before the last iteration (3 done): block 0 past its window, block 1 half-way
    want = [mask_probability(3, 0, 2), mask_probability(3, 2, 4)]
    assert want == [0.0, 0.5 ** 0.9]
    torch.testing.assert_close(model.attn_mask_probs, torch.tensor(want))
    logged = runner.message_hub.log_scalars
    losses = [k for k in logged if k.startswith('train/loss_')]
    assert {'train/loss_cls', 'train/loss_mask_0', 'train/loss_dice_1'} <= set(losses)
    assert all(torch.isfinite(torch.tensor(logged[k].current())) for k in losses)
    moved = model.state_dict()
    assert not torch.equal(moved['query.weight'], initial['query.weight'])
    assert not torch.equal(moved['backbone.blocks.3.attn.qkv.weight'], initial['backbone.blocks.3.attn.qkv.weight'])
    model.eval()
    with torch.no_grad():
        samples = model(torch.randn(1, 3, 64, 64), [_sample()], mode='predict')
    assert samples[0].pred_sem_seg.data.shape == (1, 64, 64)


def _sample():
    from mmengine.structures import BaseDataElement
    return BaseDataElement(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64)))
