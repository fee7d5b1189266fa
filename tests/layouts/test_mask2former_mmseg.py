"""configs/mask2former_swint_ade20k.py is mmseg's Mask2Former Swin-T ADE20K recipe, key by key.

Facts about mmseg (mmsegmentation 1.x ``configs/mask2former/mask2former_swin-t_8xb2-160k_ade20k-512x512.py`` resolved
with its base ``mask2former_r50_8xb2-160k_ade20k-512x512.py``, the ADE20K dataset and runtime bases; the code it
builds: mmdet's ``Mask2FormerHead``, ``MSDeformAttnPixelDecoder`` and mmengine's ``DefaultOptimWrapperConstructor``)
are written here as a table, mapped onto this project's names where they differ. mmseg's parameter-wise optimizer
rules (custom keys on mmseg's parameter names) are applied to this model's parameters renamed to mmseg's, and the
learning rate and weight decay each gets must equal what the config's own keys give it on this project's names."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

import heads

from .test_mmseg_recipe import MEAN, MMSEG_TEST_PIPELINE, STD, lookup, plain

CONFIG = Path(__file__).resolve().parents[2] / 'configs' / 'mask2former_swint_ade20k.py'

# mmseg's resolved recipe, as our config spells it: (our key, mmseg's value, mmseg's key / where it comes from).
MMSEG_RECIPE = [
    ('model.type', 'Mask2Former', "EncoderDecoder with decode_head Mask2FormerHead (mmdet's)"),
    ('model.data_preprocessor.mean', MEAN, 'data_preprocessor.mean'),
    ('model.data_preprocessor.std', STD, 'data_preprocessor.std (bgr_to_rgb=True: mmseg reads BGR, we read RGB)'),
    ('model.data_preprocessor.pad_val', 0, 'data_preprocessor.pad_val'),
    ('model.data_preprocessor.seg_pad_val', 255, 'data_preprocessor.seg_pad_val'),
    ('model.data_preprocessor.size', (512, 512), 'data_preprocessor.size=crop_size (training batches)'),
    ('model.data_preprocessor.size_divisor', 32, 'data_preprocessor.test_cfg.size_divisor'),
    ('model.backbone.name', 'swin_tiny_patch4_window7_224',
     'SwinTransformer embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=7, mlp_ratio=4, '
     'qkv_bias=True, patch_norm=True (drop_rate=0, attn_drop_rate=0)'),
    ('model.backbone.pretrained', 'checkpoints/swin_tiny_patch4_window7_224.ms_in1k.safetensors',
     'init_cfg checkpoint swin_tiny_patch4_window7_224_20220317-1cdeb081.pth (the official Swin-T ImageNet-1k)'),
    ('model.backbone.out_indices', (0, 1, 2, 3), 'backbone.out_indices (each through norm{i})'),
    ('model.backbone.drop_path_rate', 0.3, 'backbone.drop_path_rate'),
    ('model.backbone.window_layout', 'mmseg', "mmseg's ShiftWindowMSA pads to window multiples, then rolls"),
    ('model.pixel_decoder.in_channels', [96, 192, 384, 768], 'decode_head.in_channels'),
    ('model.pixel_decoder.in_strides', [4, 8, 16, 32], 'decode_head.strides'),
    ('model.pixel_decoder.channels', 256, 'decode_head.feat_channels; encoder embed_dims 256'),
    ('model.pixel_decoder.mask_channels', 256, 'decode_head.out_channels (the mask features)'),
    ('model.pixel_decoder.num_layers', 6, 'pixel_decoder.encoder.num_layers'),
    ('model.pixel_decoder.num_heads', 8, 'encoder self_attn_cfg.num_heads'),
    ('model.pixel_decoder.num_points', 4, 'encoder self_attn_cfg.num_points'),
    ('model.pixel_decoder.num_levels', 3, 'encoder self_attn_cfg.num_levels; pixel_decoder.num_outs'),
    ('model.pixel_decoder.ffn_channels', 1024, 'encoder ffn_cfg.feedforward_channels (ReLU)'),
    ('model.pixel_decoder.dropout', 0.0, 'encoder self_attn_cfg.dropout, ffn_cfg.ffn_drop'),
    ('model.pixel_decoder.common_stride', 4, 'the stride-4 map joins by one FPN step'),
    ('model.decoder.num_classes', 150, 'decode_head.num_classes'),
    ('model.decoder.num_queries', 100, 'decode_head.num_queries'),
    ('model.decoder.channels', 256, 'transformer_decoder layer embed_dims 256'),
    ('model.decoder.mask_channels', 256, 'decode_head.out_channels'),
    ('model.decoder.num_layers', 9, 'transformer_decoder.num_layers'),
    ('model.decoder.num_heads', 8, 'self_attn_cfg.num_heads, cross_attn_cfg.num_heads'),
    ('model.decoder.ffn_channels', 2048, 'ffn_cfg.feedforward_channels (ReLU)'),
    ('model.decoder.num_levels', 3, 'decode_head.num_transformer_feat_level'),
    ('model.decoder.input_proj', False, 'enforce_decoder_input_project=False (256 in, 256 wide: none)'),
    ('model.decoder.dropout', 0.0, 'attn_drop, proj_drop, ffn_drop 0.0'),
    ('model.loss.class_weight', 2.0, 'loss_cls.loss_weight'),
    ('model.loss.no_object_weight', 0.1, 'loss_cls.class_weight=[1.0] * num_classes + [0.1]'),
    ('model.loss.mask_weight', 5.0, 'loss_mask.loss_weight (CrossEntropyLoss use_sigmoid=True)'),
    ('model.loss.dice_weight', 5.0, 'loss_dice.loss_weight (DiceLoss naive_dice=True, eps=1.0)'),
    ('model.loss.num_points', 12544, 'train_cfg.num_points'),
    ('model.loss.oversample_ratio', 3.0, 'train_cfg.oversample_ratio'),
    ('model.loss.importance_sample_ratio', 0.75, 'train_cfg.importance_sample_ratio'),
    ('model.loss.cost_class', 2.0, 'assigner ClassificationCost weight'),
    ('model.loss.cost_mask', 5.0, 'assigner CrossEntropyLossCost weight (use_sigmoid=True)'),
    ('model.loss.cost_dice', 5.0, 'assigner DiceCost weight (pred_act=True, eps=1.0)'),
    ('model.test_cfg.mode', 'whole', "test_cfg=dict(mode='whole')"),
    ('model.test_cfg.tasks', ('semantic',), 'Mask2FormerHead.predict: seg_logits = softmax classes x sigmoid masks'),
    ('optim_wrapper.type', 'OptimWrapper', 'optim_wrapper.type'),
    ('optim_wrapper.optimizer.type', 'AdamW', 'optimizer.type'),
    ('optim_wrapper.optimizer.lr', 1e-4, 'optimizer.lr'),
    ('optim_wrapper.optimizer.betas', (0.9, 0.999), 'optimizer.betas'),
    ('optim_wrapper.optimizer.eps', 1e-8, 'optimizer.eps'),
    ('optim_wrapper.optimizer.weight_decay', 0.05, 'optimizer.weight_decay'),
    ('optim_wrapper.clip_grad', dict(max_norm=0.01, norm_type=2), 'optim_wrapper.clip_grad'),
    ('optim_wrapper.paramwise_cfg.norm_decay_mult', 0.0, 'paramwise_cfg.norm_decay_mult'),
    ('param_scheduler', [dict(type='PolyLR', power=0.9, eta_min=0.0, by_epoch=False, begin=0, end=160000)],
     'param_scheduler (no warm-up)'),
    ('train_cfg', dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=5000), 'train_cfg'),
    ('effective_batch_size', 16, '8 GPUs x train_dataloader.batch_size 2'),
    ('auto_scale_lr', dict(enable=False, base_batch_size=16), 'auto_scale_lr'),
    ('train_dataloader.batch_size', 2, 'train_dataloader.batch_size'),
    ('train_dataloader.sampler', dict(type='InfiniteSampler', shuffle=True), 'train_dataloader.sampler'),
    ('train_dataloader.dataset.type', 'ADE20KDataset', 'ADE20KDataset, LoadAnnotations(reduce_zero_label=True)'),
    ('val_dataloader.batch_size', 1, 'val_dataloader.batch_size'),
    ('val_evaluator', dict(type='IoUMetric', ignore_index=255), "IoUMetric iou_metrics=['mIoU']"),
    ('default_hooks.checkpoint.interval', 5000, 'default_hooks.checkpoint.interval, by_epoch=False'),
    ('default_hooks.checkpoint.save_best', 'mIoU', 'default_hooks.checkpoint.save_best'),
    ('default_hooks.logger.interval', 50, 'default_hooks.logger.interval'),
]
#: The training pipeline of mask2former_r50_8xb2-160k_ade20k-512x512 (scales: int(512 * x * 0.1), x = 5..20).
MMSEG_TRAIN_PIPELINE = [
    ('LoadImage', {}), ('LoadAnnotations', {}),
    ('RandomChoiceResize', dict(scales=[256, 307, 358, 409, 460, 512, 563, 614, 665, 716, 768, 819, 870, 921, 972,
                                        1024], resize_type='ResizeShortestEdge', max_size=2048)),
    ('RandomCrop', dict(crop_size=(512, 512), cat_max_ratio=0.75)),
    ('RandomFlip', dict(prob=0.5)), ('PhotoMetricDistortion', {}), ('PackDenseInputs', {})]

#: mmseg's paramwise_cfg.custom_keys on mmseg's names: key -> (lr_mult, decay_mult); the per-block and per-merging
#: norm keys are listed for depths 2/2/6/2. norm_decay_mult=0.0 for every other norm layer.
MMSEG_DEPTHS = (2, 2, 6, 2)
MMSEG_CUSTOM_KEYS = {
    'backbone': (0.1, 1.0), 'backbone.patch_embed.norm': (0.1, 0.0), 'backbone.norm': (0.1, 0.0),
    'absolute_pos_embed': (0.1, 0.0), 'relative_position_bias_table': (0.1, 0.0),
    'query_embed': (1.0, 0.0), 'query_feat': (1.0, 0.0), 'level_embed': (1.0, 0.0),
    **{f'backbone.stages.{s}.blocks.{b}.norm': (0.1, 0.0) for s, n in enumerate(MMSEG_DEPTHS) for b in range(n)},
    **{f'backbone.stages.{s}.downsample.norm': (0.1, 0.0) for s in range(len(MMSEG_DEPTHS) - 1)},
}
#: Our head parameters that mmdet names otherwise (the others carry none of mmseg's keys under either name).
HEAD_NAMES = {'decoder.query_pos': 'decode_head.query_embed.weight',
              'decoder.query_feat': 'decode_head.query_feat.weight',
              'decoder.level_embed': 'decode_head.level_embed.weight',
              'pixel_decoder.level_embed': 'decode_head.pixel_decoder.level_encoding.weight'}


def mmseg_name(name: str) -> str:
    """Our parameter name -> mmseg's (its Swin's names; the head's under ``decode_head``)."""
    if name in HEAD_NAMES:
        return HEAD_NAMES[name]
    if not name.startswith('backbone.'):
        return 'decode_head.' + name
    parts = name.split('.')
    if parts[1] == 'patch_embed':
        return name.replace('patch_embed.proj.', 'patch_embed.projection.')
    if parts[1] == 'out_norms':
        return f'backbone.norm{parts[2]}.{parts[3]}'
    stage, rest = int(parts[2]), '.'.join(parts[4:])
    if parts[3] == 'downsample':  # ours at the start of stage s, mmseg's at the end of stage s - 1
        return f'backbone.stages.{stage - 1}.downsample.{rest}'
    block, rest = parts[4], '.'.join(parts[5:])
    rest = {'attn.pos_bias.table': 'attn.w_msa.relative_position_bias_table'}.get(rest, rest)
    rest = rest.replace('mlp.fc1.', 'ffn.layers.0.0.').replace('mlp.fc2.', 'ffn.layers.1.')
    if rest.startswith('attn.') and 'w_msa' not in rest:
        rest = 'attn.w_msa.' + rest[len('attn.'):]
    return f'backbone.stages.{stage}.blocks.{block}.{rest}'


def mmseg_rule(name: str, is_norm: bool, lr: float, weight_decay: float) -> tuple[float, float]:
    """mmengine's DefaultOptimWrapperConstructor with mmseg's keys: the longest custom key (ties alphabetical) that
    is a substring of the name sets the multipliers; otherwise a norm layer's decay is multiplied by 0."""
    for key in sorted(sorted(MMSEG_CUSTOM_KEYS), key=len, reverse=True):
        if key in name:
            lr_mult, decay_mult = MMSEG_CUSTOM_KEYS[key]
            return lr * lr_mult, weight_decay * decay_mult
    return lr, 0.0 if is_norm else weight_decay


def tiny_model() -> torch.nn.Module:
    """The recipe's model at a CPU size: Swin of width 8 with mmseg's 2/2/6/2 blocks, 32-wide heads, 5 classes."""
    cfg = Config.fromfile(str(CONFIG))
    cfg.model.backbone.update(pretrained=None, embed_dim=8, num_heads=(1, 2, 2, 4))
    cfg.model.pixel_decoder.update(in_channels=[8, 16, 32, 64], channels=32, mask_channels=32, num_layers=1,
                                   ffn_channels=64)
    cfg.model.decoder.update(num_classes=5, channels=32, mask_channels=32, num_queries=10, num_layers=3,
                             ffn_channels=64)
    torch.manual_seed(0)
    return heads.MODELS.build(cfg.model)


def test_recipe_resolves_to_mmsegs_values_key_by_key():
    cfg = Config.fromfile(str(CONFIG))
    wrong = [f'{key}: {lookup(cfg, key)!r}, mmseg {value!r} ({source})' for key, value, source in MMSEG_RECIPE
             if plain(lookup(cfg, key)) != plain(value)]
    assert not wrong, '\n'.join(wrong)
    assert MMSEG_TRAIN_PIPELINE[2][1]['scales'] == [int(512 * x * 0.1) for x in range(5, 21)]
    for pipeline, facts in ((cfg.train_dataloader.dataset.pipeline, MMSEG_TRAIN_PIPELINE),
                            (cfg.test_dataloader.dataset.pipeline, MMSEG_TEST_PIPELINE)):
        assert [t['type'] for t in pipeline] == [name for name, _ in facts]
        for step, (name, options) in zip(pipeline, facts):
            assert plain({k: step[k] for k in options}) == plain(options), name
    from zoo.registry import get_variant  # the Swin-T the name builds: mmseg's sizes
    args = get_variant('swin_tiny_patch4_window7_224').kwargs
    assert {k: args[k] for k in ('embed_dim', 'depths', 'num_heads', 'window')} == \
        dict(embed_dim=96, depths=MMSEG_DEPTHS, num_heads=(3, 6, 12, 24), window=7)


def test_the_built_parts_are_mmsegs():
    """What the keys build: no neck, the pixel decoder encoding strides 8/16/32 and one FPN step, no decoder input
    projection, a prediction before the first layer and after each (the recipe's 10, all supervised), the loss's
    class weights [1] * 150 + [0.1] and the matching costs."""
    cfg = Config.fromfile(str(CONFIG))
    criterion = heads.MODELS.build({**cfg.model.loss, 'num_classes': 150})
    assert torch.equal(criterion.class_weights, torch.tensor([1.0] * 150 + [0.1]))
    matcher = criterion.matcher
    assert (matcher.cost_class, matcher.cost_mask, matcher.cost_dice, matcher.num_points) == (2.0, 5.0, 5.0, 12544)
    model = tiny_model().eval()
    assert model.neck is None and model.taps == [0, 1, 2, 3]
    assert len(model.pixel_decoder.input_proj) == 3 and len(model.pixel_decoder.lateral) == 1
    assert [layer.attn.num_points for layer in model.pixel_decoder.layers] == [4]
    assert all(isinstance(p, torch.nn.Identity) for p in model.decoder.input_proj)
    model.train()
    class_logits, mask_logits, aux = model.forward_logits(torch.randn(1, 3, 64, 96))
    assert class_logits.shape == (1, 10, 6) and mask_logits.shape == (1, 10, 16, 24) and len(aux) == 3


def test_every_parameter_gets_mmsegs_rate_and_decay():
    """mmseg's custom keys on mmseg's names and our config's keys on ours give each parameter the same rate and
    weight decay (the backbone at 0.1 of the rate, its norms and position tables and the query and decoder level
    embeddings undecayed, the head's GroupNorm and LayerNorm undecayed, the rest decayed by 0.05)."""
    model = tiny_model()
    cfg = Config.fromfile(str(CONFIG))
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    got = {id(p): (group['lr'], group['weight_decay']) for group in wrapper.optimizer.param_groups
           for p in group['params']}
    norms = (torch.nn.LayerNorm, torch.nn.GroupNorm)
    norm_params = {id(p) for m in model.modules() if isinstance(m, norms) for p in m.parameters(recurse=False)}
    mapped = {name: mmseg_name(name) for name, _ in model.named_parameters()}
    plain_head = [theirs for ours, theirs in mapped.items() if ours.split('.')[0] != 'backbone'
                  and ours not in HEAD_NAMES and any(key in theirs for key in MMSEG_CUSTOM_KEYS)]
    assert not plain_head, plain_head  # no other head name meets one of mmseg's keys
    wrong = []
    for name, p in model.named_parameters():
        want = mmseg_rule(mapped[name], id(p) in norm_params, 1e-4, 0.05)
        if got[id(p)] != pytest.approx(want):
            wrong.append(f'{name} (mmseg {mapped[name]}): lr, decay {got[id(p)]}, mmseg {want}')
    assert not wrong, '\n'.join(wrong)
    kinds = {(round(lr, 12), round(decay, 12)) for lr, decay in got.values()}
    assert kinds == {(1e-5, 0.05), (1e-5, 0.0), (1e-4, 0.0), (1e-4, 0.05)}
    assert got[id(model.pixel_decoder.level_embed)] == pytest.approx((1e-4, 0.05))  # mmdet's level_encoding
    assert got[id(model.decoder.level_embed)] == pytest.approx((1e-4, 0.0))
    assert sum(1 for n in mapped.values() if 'relative_position_bias_table' in n) == sum(MMSEG_DEPTHS)
