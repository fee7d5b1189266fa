"""configs/mask2former_vitt4_camvid_cpu.py: the DPT CPU config but for the model (what tools/compare.py --heads
compares), fit for any backbone of the grid (a plain ViT through the simple pyramid, hierarchical stage maps as they
are), and one training step that moves every part."""
from pathlib import Path

import torch
from mmengine.config import Config

import heads

from .test_upernet import one_camvid_step

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'


def test_the_config_is_the_dpt_one_but_for_the_model_and_fits_any_backbone():
    from lab.benchmark.compare import check_only_backbones_differ, head_backbone_grid
    configs = {name: Config.fromfile(str(CONFIGS / f'{name}.py')) for name in ('dpt_vitt4_camvid_cpu',
                                                                                 'mask2former_vitt4_camvid_cpu')}
    check_only_backbones_differ(configs, 'heads')
    assert configs['mask2former_vitt4_camvid_cpu'].model.data_preprocessor == \
        configs['dpt_vitt4_camvid_cpu'].model.data_preprocessor
    grid = head_backbone_grid({'m2f': configs['mask2former_vitt4_camvid_cpu']},
                              ['vit_tiny_patch16_224:{"depth": 4}', 'cvt_13_224', 'swin_tiny_patch4_window7_224'])
    with torch.device('meta'):
        models = {label: heads.MODELS.build(cfg.model) for label, cfg in grid.items()}
    levels = {label: (m.neck is not None, [p[0].in_channels for p in m.pixel_decoder.input_proj],
                      [p[0].in_channels for p in m.pixel_decoder.lateral]) for label, m in models.items()}
    assert levels == {'m2f+vit_tiny_patch16_224': (True, [64, 64, 64], [64]),
                      'm2f+cvt_13_224': (False, [384, 192, 64], []),
                      'm2f+swin_tiny_patch4_window7_224': (False, [768, 384, 192], [96])}


def test_one_training_step_moves_every_part():
    cfg = Config.fromfile(str(CONFIGS / 'mask2former_vitt4_camvid_cpu.py'))
    cfg.model.backbone.update(depth=2)
    cfg.model.loss.num_points = 512  # of 6144 pixels (the config's 4096 are for a 176x240 crop)
    torch.manual_seed(0)
    model = heads.MODELS.build(cfg.model)
    assert model.decoder.class_head.out_features == 12 and model.neck.out_channels == 64
    log, wrapper, changed = one_camvid_step(model, cfg.optim_wrapper)
    assert {'loss_cls', 'loss_mask', 'loss_dice', 'loss_dice_2'} <= set(log)
    assert all(torch.isfinite(v) for v in log.values())
    assert changed == {'backbone', 'neck', 'pixel_decoder', 'decoder'}
    undecayed = {n for group in wrapper.optimizer.param_groups if group['weight_decay'] == 0
                 for n, p in model.named_parameters() if any(p is q for q in group['params'])}
    assert {'decoder.query_feat', 'decoder.query_pos', 'decoder.level_embed', 'pixel_decoder.level_embed'} <= undecayed
