"""configs/eomt_dinov2_vitl_ade20k_512.py and configs/eomt_dinov2_vitl_coco_panoptic_640.py are the EoMT paper's
ADE20K semantic and COCO panoptic recipes, key by key.

Facts about tue-mps/eomt (``configs/dinov2/ade20k/semantic/eomt_large_512.yaml``,
``configs/dinov2/coco/panoptic/eomt_large_640.yaml`` and the defaults of the classes they name) are written here as
tables, each with where it comes from; the optimizer's groups and the schedule are
checked by building them from the config, against the recipe's rules written out here (not from this project's
code that implements them)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope

from heads.models.eomt_parts import annealing_steps
from heads.registry import MODELS, PARAM_SCHEDULERS

from ..layouts.test_mmseg_recipe import lookup, plain

CONFIG = Path(__file__).resolve().parents[2] / 'configs' / 'eomt_dinov2_vitl_ade20k_512.py'
COCO_CONFIG = CONFIG.with_name('eomt_dinov2_vitl_coco_panoptic_640.py')
# models/vit.py pixel_mean / pixel_std [0.485, 0.456, 0.406] / [0.229, 0.224, 0.225] on images / 255, on 0..255
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]

# (our key, the recipe's value, where the recipe says it)
EOMT_RECIPE = [
    ('model.type', 'EoMT', 'models/eomt.py EoMT'),
    ('model.backbone.name', 'vit_large_patch14_reg4_dinov2', "models/vit.py ViT backbone_name default"),
    ('model.backbone.patch_size', 16, 'models/vit.py ViT patch_size=16, passed to timm.create_model'),
    ('model.backbone.img_size', 512, 'ade20k_semantic.py img_size (512, 512), linked to the encoder by main.py'),
    ('model.backbone.drop_path_rate', 0.0, 'timm.create_model without drop_path_rate (timm default 0)'),
    ('model.backbone.tap_norm', True, 'models/eomt.py: predictions from encoder.backbone.norm(x)'),
    ('model.backbone_norm', True, 'models/eomt.py: the backbone norm, not a new one'),
    ('model.num_classes', 150, 'ade20k_semantic.py num_classes=150'),
    ('model.num_queries', 100, 'eomt_large_512.yaml network num_q: 100'),
    ('model.num_blocks', 4, 'models/eomt.py EoMT num_blocks=4'),
    ('model.loss.type', 'MaskClassificationLoss', 'training/mask_classification_loss.py'),
    ('model.loss.num_points', 12544, 'mask_classification_semantic.py num_points'),
    ('model.loss.oversample_ratio', 3.0, 'mask_classification_semantic.py oversample_ratio'),
    ('model.loss.importance_sample_ratio', 0.75, 'mask_classification_semantic.py importance_sample_ratio'),
    ('model.loss.no_object_weight', 0.1, 'mask_classification_semantic.py no_object_coefficient'),
    ('model.loss.mask_weight', 5.0, 'mask_classification_semantic.py mask_coefficient (also the matcher cost)'),
    ('model.loss.dice_weight', 5.0, 'mask_classification_semantic.py dice_coefficient (also the matcher cost)'),
    ('model.loss.class_weight', 2.0, 'mask_classification_semantic.py class_coefficient (also the matcher cost)'),
    ('model.data_preprocessor.mean', MEAN, 'models/vit.py pixel_mean, lightning_module.py forward x / 255'),
    ('model.data_preprocessor.std', STD, 'models/vit.py pixel_std, lightning_module.py forward x / 255'),
    ('model.data_preprocessor.size', (512, 512), 'transforms.py pad to img_size, then RandomCrop(img_size)'),
    ('model.data_preprocessor.seg_pad_val', 255, 'transforms.py pads target masks with False (no target)'),
    ('model.test_cfg.mode', 'slide', 'mask_classification_semantic.py eval_step: window_imgs_semantic'),
    ('model.test_cfg.tasks', ('semantic',), 'mask_classification_semantic.py: per-pixel class scores'),
    ('model.test_cfg.crop_size', (512, 512), 'lightning_module.py window_imgs_semantic: img_size windows'),
    ('model.test_cfg.stride', (512, 512), 'window_imgs_semantic: ceil(long / 512) windows (config comment)'),
    ('train_dataloader.batch_size', 16, 'ade20k_semantic.py batch_size=16, main.py trainer devices=1'),
    ('effective_batch_size', 16, 'README: devices x batch_size = 16'),
    ('train_dataloader.dataset.type', 'ADE20KDataset', 'ade20k_semantic.py ADEChallengeData2016 training'),
    ('val_dataloader.dataset.split', 'validation', 'ade20k_semantic.py ADEChallengeData2016 validation'),
    ('val_evaluator', dict(type='IoUMetric', ignore_index=255), 'MulticlassJaccardIndex ignore_index=255, mean'),
    ('optim_wrapper.type', 'AutocastOptimWrapper', "main.py trainer precision '16-mixed'"),
    ('optim_wrapper.dtype', 'float16', "main.py trainer precision '16-mixed'"),
    ('optim_wrapper.clip_grad', dict(max_norm=0.01, norm_type=2), "main.py gradient_clip_val 0.01, 'norm'"),
    ('optim_wrapper.optimizer.type', 'AdamW', 'lightning_module.py configure_optimizers AdamW'),
    ('optim_wrapper.optimizer.lr', 1e-4, 'mask_classification_semantic.py lr=1e-4'),
    ('optim_wrapper.optimizer.betas', (0.9, 0.999), 'torch AdamW defaults (none given)'),
    ('optim_wrapper.optimizer.weight_decay', 0.05, 'mask_classification_semantic.py weight_decay=0.05'),
    ('optim_wrapper.paramwise_cfg.layer_decay_rate', 0.8, 'mask_classification_semantic.py llrd=0.8'),
    ('param_scheduler', [dict(type='TwoStageWarmupPolyLR', warmup=(500, 1000), power=0.9, begin=0, end=39120,
                              by_epoch=False)],
     'mask_classification_semantic.py warmup_steps [500, 1000], poly_power 0.9; two_stage_warmup_poly_schedule.py'),
    ('train_cfg.max_iters', 39120, 'eomt_large_512.yaml max_epochs 31; its annealing steps are sixths of 39120'),
    ('train_cfg.val_interval', 1262, 'Lightning validates every epoch: 39120 / 31 steps'),
    ('randomness.seed', 0, 'main.py seed_everything_default=0'),
]
# train pipeline: (type, options) in order; the recipe's transforms.py (colour jitter, flip, ScaleJitter, pad, crop)
EOMT_TRAIN_PIPELINE = [
    ('LoadImage', {}),
    ('LoadAnnotations', {}),  # ade20k_semantic.py CLASS_MAPPING: 1..150 -> 0..149, 0 dropped (ADE20KDataset's 255)
    ('RandomResize', dict(scale=(512, 512), ratio_range=(0.5, 2.0), keep_ratio=True)),  # ScaleJitter(img_size)
    ('RandomCrop', dict(crop_size=(512, 512), cat_max_ratio=1.0)),  # RandomCrop(img_size), no class-ratio retry
    ('RandomFlip', dict(prob=0.5)),  # RandomHorizontalFlip()
    ('PhotoMetricDistortion', {}),  # color_jitter_enabled=True: brightness 32, contrast/saturation 0.5, hue 18
    ('Pad', dict(size=(512, 512), pad_val=0, seg_pad_val=255)),  # transforms.py pad: zeros, no target mask
    ('PackDenseInputs', {}),
]
# test: the short side to 512 (scale_img_size_semantic: factor max(512 / h, 512 / w)); ground truth at full size
EOMT_TEST_PIPELINE = [('LoadImage', {}), ('Resize', dict(scale=(2048, 512), keep_ratio=True)),
                      ('LoadAnnotations', {}), ('PackDenseInputs', {})]
# What this project cannot say as the recipe does: each named in the config's comments (the phrase that names it).
NOT_EXPRESSED = [
    'colour jitter',          # transforms.py: torchvision's colour ops before flip and scale jitter
    'redrawn',                # transforms.py forward: a crop without any target is drawn again
    'check_empty_targets',    # dataset.py: training images without labels left out
    'antialiased',            # torchvision / PIL resizing
    'spreads the overlap',    # lightning_module.py window_imgs_semantic: even overlap of 3+ windows
    'torch.compile',          # main.py: the module compiled unless --compile_disabled
]
# mask annealing: eomt_large_512.yaml attn_mask_annealing_start_steps / end_steps, power = poly_power 0.9
ANNEALING = [(6520, 13040), (13040, 19560), (19560, 26080), (26080, 32600)]


def test_recipe_resolves_to_eomts_values_key_by_key():
    assert MEAN == pytest.approx([255 * m for m in (0.485, 0.456, 0.406)])
    assert STD == pytest.approx([255 * s for s in (0.229, 0.224, 0.225)])
    cfg = Config.fromfile(str(CONFIG))
    wrong = [f'{key}: {lookup(cfg, key)!r}, EoMT {value!r} ({source})' for key, value, source in EOMT_RECIPE
             if plain(lookup(cfg, key)) != plain(value)]
    assert not wrong, '\n'.join(wrong)
    for pipeline, facts in ((cfg.train_dataloader.dataset.pipeline, EOMT_TRAIN_PIPELINE),
                            (cfg.test_dataloader.dataset.pipeline, EOMT_TEST_PIPELINE)):
        assert [t['type'] for t in pipeline] == [name for name, _ in facts]
        for step, (name, options) in zip(pipeline, facts):
            assert plain({k: step[k] for k in options}) == plain(options), name
    comments = ' '.join(line.lstrip('# ') for line in CONFIG.read_text().splitlines() if line.startswith('#'))
    assert [fact for fact in NOT_EXPRESSED if fact not in comments] == []
    hooks = [h for h in cfg.custom_hooks if h.type == 'MaskAnnealingHook']
    assert len(hooks) == 1 and hooks[0].get('power', 0.9) == 0.9
    assert annealing_steps(4, cfg.train_cfg.max_iters, hooks[0].get('windows')) == ANNEALING
    from zoo.registry import get_variant  # DINOv2-L: 24 blocks of width 1024, 16 heads, 4 registers, LayerScale
    args = get_variant(cfg.model.backbone.name).kwargs
    assert {k: args[k] for k in ('embed_dim', 'depth', 'num_heads')} == dict(embed_dim=1024, depth=24, num_heads=16)
    assert args['spec'].prefix.registers == 4 and args['spec'].block.layer_scale is not None  # its spec of parts


# ---------------------------------------------------------------------------------------------- COCO panoptic
# The COCO facts that differ from ADE20K's; the model and optimisation rows above hold for both (checked below).
COCO_RECIPE = [
    ('model.backbone.img_size', 640, 'coco_panoptic.py img_size (640, 640), linked to the encoder by main.py'),
    ('model.num_classes', 133, 'coco_panoptic.py num_classes=133'),
    ('model.num_queries', 200, 'eomt_large_640.yaml network num_q: 200'),
    ('model.data_preprocessor.size', (640, 640), 'transforms.py pad to img_size, then RandomCrop(img_size)'),
    ('model.test_cfg.tasks', ('panoptic',), 'mask_classification_panoptic.py eval_step: to_per_pixel_preds_panoptic'),
    ('model.test_cfg.object_threshold', 0.8, 'mask_classification_panoptic.py mask_thresh=0.8 (on class scores)'),
    ('model.test_cfg.mask_threshold', 0.5, 'lightning_module.py to_per_pixel_preds_panoptic: masks >= 0.5'),
    ('model.test_cfg.overlap_threshold', 0.8, 'mask_classification_panoptic.py overlap_thresh=0.8'),
    ('model.test_cfg.stuff_classes', list(range(80, 133)), 'eomt_large_640.yaml data stuff_classes 80..132'),
    ('train_dataloader.dataset.type', 'CocoPanopticDataset', 'coco_panoptic.py train2017, panoptic_train2017'),
    ('val_dataloader.dataset.ann_file', 'annotations/panoptic_val2017.json', 'coco_panoptic.py val2017'),
    ('val_evaluator', [dict(type='PanopticQualityMetric')], 'init_metrics_panoptic: PanopticQuality (PQ, SQ, RQ)'),
    ('param_scheduler', [dict(type='TwoStageWarmupPolyLR', warmup=(500, 1000), power=0.9, begin=0, end=88692,
                              by_epoch=False)],
     'mask_classification_panoptic.py warmup_steps [500, 1000], poly_power 0.9'),
    ('train_cfg.max_iters', 88692, 'eomt_large_640.yaml max_epochs 12; its annealing steps are sixths of 88692'),
    ('train_cfg.val_interval', 7391, 'Lightning validates every epoch: 88692 / 12 steps'),
]
COCO_TRAIN_PIPELINE = [
    ('LoadImage', {}),
    ('LoadPanopticAnnotations', {}),  # coco_panoptic.py target_parser; transforms.py drops crowd segments
    ('RandomResize', dict(scale=(640, 640), ratio_range=(0.1, 2.0), keep_ratio=True)),  # coco scale_range
    ('RandomCrop', dict(crop_size=(640, 640), cat_max_ratio=1.0)),
    ('RandomFlip', dict(prob=0.5)),  # color_jitter_enabled=False: no colour jitter
    ('Pad', dict(size=(640, 640), pad_val=0, seg_pad_val=255)),
    ('PackDenseInputs', {}),
]
# test: scale_img_size_instance_panoptic, the long side to 640
COCO_TEST_PIPELINE = [('LoadImage', {}), ('Resize', dict(scale=(640, 640), keep_ratio=True)),
                      ('LoadPanopticAnnotations', {}), ('PackDenseInputs', {})]
COCO_ANNEALING = [(14782, 29564), (29564, 44346), (44346, 59128), (59128, 73910)]  # eomt_large_640.yaml
COCO_NOT_EXPRESSED = ['test padding', 'exact ties', 'check_empty_targets', 'antialiased', 'torch.compile']
SHARED = ('model.type', 'model.backbone.', 'model.backbone_norm', 'model.num_blocks', 'model.loss.',
          'model.data_preprocessor.mean', 'model.data_preprocessor.std', 'optim_wrapper.',
          'train_dataloader.batch_size', 'effective_batch_size', 'randomness.')


def test_coco_panoptic_recipe_resolves_to_eomts_values_key_by_key():
    cfg = Config.fromfile(str(COCO_CONFIG))
    shared = [(key, value, source) for key, value, source in EOMT_RECIPE if key.startswith(SHARED)
              and key not in {k for k, _, _ in COCO_RECIPE}]
    assert len(shared) > 20
    wrong = [f'{key}: {lookup(cfg, key)!r}, EoMT {value!r} ({source})' for key, value, source in shared + COCO_RECIPE
             if plain(lookup(cfg, key)) != plain(value)]
    assert not wrong, '\n'.join(wrong)
    for pipeline, facts in ((cfg.train_dataloader.dataset.pipeline, COCO_TRAIN_PIPELINE),
                            (cfg.test_dataloader.dataset.pipeline, COCO_TEST_PIPELINE)):
        assert [t['type'] for t in pipeline] == [name for name, _ in facts]
        for step, (name, options) in zip(pipeline, facts):
            assert plain({k: step[k] for k in options}) == plain(options), name
    comments = ' '.join(line.lstrip('# ') for line in COCO_CONFIG.read_text().splitlines() if line.startswith('#'))
    assert [fact for fact in COCO_NOT_EXPRESSED if fact not in comments] == []
    hooks = [h for h in cfg.custom_hooks if h.type == 'MaskAnnealingHook']
    assert len(hooks) == 1 and annealing_steps(4, cfg.train_cfg.max_iters, hooks[0].get('windows')) == COCO_ANNEALING


# --------------------------------------------------------------------------------- the optimizer, built small
def small_model():
    """The recipe's model with a 6-block DINOv2 of width 32 (the same family, norm and parts), 5 classes."""
    cfg = Config.fromfile(str(CONFIG))
    cfg.model.backbone.update(pretrained=None, embed_dim=32, depth=6, num_heads=2, img_size=64)
    cfg.model.num_classes = 5
    return MODELS.build(cfg.model), cfg


def eomt_lr_scale(name: str, depth: int, llrd: float = 0.8) -> float:
    """The recipe's rate for a parameter (lightning_module.py configure_optimizers, llrd_l2_enabled=True): block i
    of the encoder llrd ** (depth - 1 - i); the encoder's parameters before its first block as block 0; its final
    norm and everything outside the encoder the base rate."""
    if not name.startswith('backbone.') or name.startswith('backbone.norm.'):
        return 1.0
    parts = name.split('.')
    block = int(parts[2]) if parts[1] == 'blocks' else 0
    return llrd ** (depth - 1 - block)


def test_optimizer_groups_are_eomts_layer_decay_and_weight_decay():
    model, cfg = small_model()
    with DefaultScope.overwrite_default_scope('heads'):
        wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    groups = wrapper.optimizer.param_groups
    assert {g['name'] for g in groups} == {n for n, _ in model.named_parameters()}
    for g in groups:
        assert math.isclose(g['lr'], 1e-4 * eomt_lr_scale(g['name'], 6)), g['name']
        assert g['weight_decay'] == 0.05, g['name']  # every parameter, norms and tokens too
    lrs = {g['name']: g['lr'] for g in groups}
    assert lrs['backbone.blocks.5.attn.qkv.weight'] == 1e-4 and lrs['backbone.norm.weight'] == 1e-4
    assert math.isclose(lrs['backbone.patch_embed.proj.weight'], 1e-4 * 0.8 ** 5)
    assert lrs['query.weight'] == lrs['class_head.weight'] == 1e-4


# ------------------------------------------------------------------------------------------------ the schedule
def lr_at(steps: list[int]) -> dict[int, tuple[float, float]]:
    """(new-parameter rate, backbone rate) after each of ``steps`` optimizer steps, from the config's scheduler on
    two groups: a backbone one at 0.8 and a new one at 1.0."""
    cfg = Config.fromfile(str(CONFIG))
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(2)]
    optimizer = torch.optim.AdamW([dict(params=[params[0]], lr=0.8, name='backbone.blocks.0.mlp.fc1.weight'),
                                   dict(params=[params[1]], lr=1.0, name='query.weight')])
    scheduler = PARAM_SCHEDULERS.build(dict(cfg.param_scheduler[0], optimizer=optimizer))
    optimizer.step()  # once, so that the scheduler steps after the optimizer as in training
    out = {}
    for step in range(max(steps) + 1):
        if step in steps:
            out[step] = (optimizer.param_groups[1]['lr'], optimizer.param_groups[0]['lr'] / 0.8)
        scheduler.step()
    return out


def test_schedule_is_eomts_two_stage_warmup_then_poly():
    # two_stage_warmup_poly_schedule.py by hand: T = 39120, warm-ups 500 (new) then 1000 (backbone), power 0.9
    T = 39120
    want = {
        0: (0.0, 0.0),
        250: (0.5, 0.0),                                  # new: 250 / 500; backbone waits
        500: (1.0, 0.0),                                  # new decays from here: (1 - 0 / 38620) ** 0.9
        1000: ((1 - 500 / 38620) ** 0.9, 0.5),            # backbone: (1000 - 500) / 1000
        1500: ((1 - 1000 / 38620) ** 0.9, 1.0),           # backbone decays from here over 37620 steps
        20000: ((1 - 19500 / 38620) ** 0.9, (1 - 18500 / 37620) ** 0.9),
        T - 1: ((1 / 38620) ** 0.9, (1 / 37620) ** 0.9),
    }
    got = lr_at(sorted(want))
    for step, (new, backbone) in want.items():
        assert got[step][0] == pytest.approx(new, rel=1e-9, abs=1e-15), step
        assert got[step][1] == pytest.approx(backbone, rel=1e-9, abs=1e-15), step
