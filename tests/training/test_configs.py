"""Configs: experiments differ only where they should (mmseg's ADE20K recipe: tests/layouts/test_mmseg_recipe.py)."""
from pathlib import Path

import pytest
from mmengine.config import Config

from heads.engine.config.diff import differing_keys

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'


def test_ade20k_and_camvid_experiments_differ_only_in_the_dataset_part():
    ade = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k_ours.py'))  # mmseg's recipe: layouts/test_mmseg_recipe.py
    camvid = Config.fromfile(str(CONFIGS / 'dpt_vitb_camvid.py'))
    dataset_part = ('data_root', 'num_classes', 'crop_size', 'train_pipeline', 'test_pipeline', 'train_dataloader',
                    'val_dataloader', 'test_dataloader', 'val_evaluator', 'test_evaluator')
    differing = differing_keys(ade, camvid)
    assert differing, 'the two experiments cannot be identical'
    outside = {k for k in differing if not k.startswith(dataset_part)} - {'model.decode_head.num_classes'}
    assert not outside, f'keys outside the dataset part differ: {sorted(outside)}'
    assert ade.model.decode_head.num_classes == 150 and camvid.model.decode_head.num_classes == 11


@pytest.mark.parametrize('config,name,small,description', [
    ('dpt_cvt13_ade20k.py', 'cvt_13_224', dict(depths=(1, 1, 1)),
     {'in_channels': [64, 192, 384, 384], 'in_strides': [4, 8, 16, 16], 'prefix_names': []}),
    ('dpt_coatnet0_ade20k.py', 'coatnet_0_rw_224', dict(depths=(1, 1, 1, 1)),
     {'in_channels': [96, 192, 384, 768], 'in_strides': [4, 8, 16, 32], 'prefix_names': []}),
    ('dpt_swint_ade20k.py', 'swin_tiny_patch4_window7_224', dict(depths=(1, 1, 1, 1)),
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
    vit = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k_ours.py'))
    other = Config.fromfile(str(CONFIGS / config))
    differing = differing_keys(vit, other)
    assert differing and all(k.startswith('model.backbone.') for k in differing), sorted(differing)
    assert other.model.backbone.name == name and 'out_indices' not in other.model.backbone  # its default levels
    backbone = heads.MODELS.build(dict(other.model.backbone, **small))
    assert heads.models.backbone.backbone_description(backbone) == description


def test_dpt_hybrid_experiment_differs_from_vit_in_the_backbone_and_the_widths_of_its_resnet_levels():
    import torch

    import heads
    vit = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k_ours.py'))
    hybrid = Config.fromfile(str(CONFIGS / 'dpt_hybrid_ade20k.py'))
    differing = differing_keys(vit, hybrid)
    neck = ('model.backbone.', 'model.neck.hidden_channels.', 'model.neck.plain_levels')
    assert differing and all(k.startswith(neck) for k in differing), sorted(differing)
    small = dict(layers=(1, 1, 1), depth=2, out_indices=(0, 1, 3, 4))  # R50's widths, one block per stage, 2 blocks
    model = heads.MODELS.build(dict(hybrid.model, backbone=dict(hybrid.model.backbone, **small))).eval()
    assert heads.models.backbone.backbone_description(model.backbone) == {
        'in_channels': [256, 512, 768, 768], 'in_strides': [4, 8, 16, 16], 'prefix_names': ['cls']}
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 96), mode='tensor').shape == (1, 150, 64, 96)
