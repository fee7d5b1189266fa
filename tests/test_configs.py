"""Configs: the ADE20K recipe is mmseg's, and experiments differ only where they should."""
from pathlib import Path

import pytest
from mmengine.config import Config

from heads.engine.config_diff import differing_keys

CONFIGS = Path(__file__).resolve().parents[1] / 'configs'


def test_ade20k_and_camvid_experiments_differ_only_in_the_dataset_part():
    ade = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    camvid = Config.fromfile(str(CONFIGS / 'dpt_vitb_camvid.py'))
    dataset_part = ('data_root', 'num_classes', 'crop_size', 'train_pipeline', 'test_pipeline', 'train_dataloader',
                    'val_dataloader', 'test_dataloader', 'val_evaluator', 'test_evaluator')
    differing = differing_keys(ade, camvid)
    assert differing, 'the two experiments cannot be identical'
    outside = {k for k in differing if not k.startswith(dataset_part)} - {'model.decode_head.num_classes'}
    assert not outside, f'keys outside the dataset part differ: {sorted(outside)}'
    assert ade.model.decode_head.num_classes == 150 and camvid.model.decode_head.num_classes == 11


def test_ade20k_config_is_mmsegs_dpt_vitb_recipe():
    cfg = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, tuple(optimizer.betas), optimizer.weight_decay) == \
        ('AdamW', 6e-5, (0.9, 0.999), 0.01)
    assert {k: v['decay_mult'] for k, v in cfg.optim_wrapper.paramwise_cfg.custom_keys.items()} == \
        {'pos_embed': 0.0, 'prefix': 0.0, 'norm': 0.0}
    warmup, poly = cfg.param_scheduler
    assert (warmup.type, warmup.start_factor, warmup.begin, warmup.end, warmup.by_epoch) == \
        ('LinearLR', 1e-6, 0, 1500, False)
    assert (poly.type, poly.power, poly.eta_min, poly.begin, poly.end) == ('PolyLR', 1.0, 0.0, 1500, 160000)
    assert cfg.train_cfg.max_iters == 160000 and cfg.train_dataloader.batch_size * 8 == 16
    pre = cfg.model.data_preprocessor
    assert (pre.mean, pre.std, pre.pad_val, pre.seg_pad_val) == \
        ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375], 0, 255)
    steps = {t['type']: t for t in cfg.train_dataloader.dataset.pipeline}
    assert steps['RandomResize']['scale'] == (2048, 512) and steps['RandomResize']['ratio_range'] == (0.5, 2.0)
    assert steps['RandomCrop']['crop_size'] == (512, 512) and steps['RandomCrop']['cat_max_ratio'] == 0.75
    assert steps['RandomFlip']['prob'] == 0.5 and 'PhotoMetricDistortion' in steps
    test_steps = [t['type'] for t in cfg.test_dataloader.dataset.pipeline]
    assert test_steps.index('Resize') < test_steps.index('LoadAnnotations')  # labels stay at original size
    assert cfg.model.backbone.out_indices == (2, 5, 8, 11) and cfg.model.neck.readout == 'project'
    assert cfg.test_dataloader.dataset.type == 'ADE20KDataset' and cfg.val_evaluator.type == 'IoUMetric'


@pytest.mark.parametrize('config,name,small,description', [
    ('dpt_cvt13_ade20k.py', 'cvt_13_224', dict(depths=(1, 1, 1)),
     {'in_channels': [64, 192, 384, 384], 'in_strides': [4, 8, 16, 16], 'prefix_names': []}),
    ('dpt_coatnet0_ade20k.py', 'coatnet_0_rw_224', dict(depths=(1, 1, 1, 1)),
     {'in_channels': [96, 192, 384, 768], 'in_strides': [4, 8, 16, 32], 'prefix_names': []}),
    ('dpt_crossvits_ade20k.py', 'crossvit_small_240', dict(depths=((1, 1, 0),) * 3),
     {'in_channels': [576] * 4, 'in_strides': [16] * 4, 'prefix_names': ['cls']}),
    ('dpt_pits_ade20k.py', 'pit_s_224', dict(depths=(1, 1, 1)),
     {'in_channels': [144, 144, 288, 576], 'in_strides': [8, 8, 16, 32], 'prefix_names': ['cls']}),
    ('dpt_levit256_ade20k.py', 'levit_256', dict(depths=(1, 1, 1)),
     {'in_channels': [256, 256, 384, 512], 'in_strides': [16, 16, 32, 64], 'prefix_names': []}),
])
def test_backbone_experiments_differ_from_vit_only_in_the_backbone(config, name, small, description):
    import heads
    vit = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    other = Config.fromfile(str(CONFIGS / config))
    differing = differing_keys(vit, other)
    assert differing and all(k.startswith('model.backbone.') for k in differing), sorted(differing)
    assert other.model.backbone.name == name and 'out_indices' not in other.model.backbone  # its default levels
    backbone = heads.MODELS.build(dict(other.model.backbone, **small))
    assert heads.models.backbone.backbone_description(backbone) == description
