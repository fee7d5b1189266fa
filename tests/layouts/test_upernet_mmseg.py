"""configs/upernet_swint_ade20k.py is mmseg's UperNet Swin-T ADE20K recipe, key by key, and mmseg's UperNet Swin
checkpoints load.

Facts about mmseg (mmsegmentation 1.x ``configs/swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-
512x512.py`` resolved with ``_base_/models/upernet_swin.py``, the ADE20K dataset, runtime and 160k schedule bases; the
code it builds: ``backbones/swin.py``, ``decode_heads/uper_head.py`` / ``fcn_head.py``, mmcv's ``ConvModule``) are
written here as a table; the checkpoint layout is written here from this project's model by the rules of mmseg's
code (its merging's ``nn.Unfold`` order found by running both modules, not by a formula) and loaded back."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

import heads
from heads.layouts.mmseg import from_mmseg
from heads.layouts.mmseg_upernet import is_mmseg_upernet, upernet_from_mmseg
from heads.models.task_checkpoint import load_task_checkpoint, task_checkpoint_layout

from ..reference import perturb_
from .test_mmseg_recipe import MEAN, MMSEG_TEST_PIPELINE, MMSEG_TRAIN_PIPELINE, STD, lookup, plain

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'

# mmseg's resolved recipe, as our config spells it: (our key, mmseg's value, mmseg's key / where it comes from).
MMSEG_RECIPE = [
    ('model.type', 'Segmentor', "model.type='EncoderDecoder'"),
    ('model.data_preprocessor.mean', MEAN, 'data_preprocessor.mean'),
    ('model.data_preprocessor.std', STD, 'data_preprocessor.std (bgr_to_rgb=True: mmseg reads BGR, we read RGB)'),
    ('model.data_preprocessor.pad_val', 0, 'data_preprocessor.pad_val'),
    ('model.data_preprocessor.seg_pad_val', 255, 'data_preprocessor.seg_pad_val'),
    ('model.data_preprocessor.size', (512, 512), 'data_preprocessor.size=crop_size (training batches)'),
    ('model.data_preprocessor.size_divisor', 1, 'no test-time size_divisor: a batch of one image is not padded'),
    ('model.backbone.name', 'swin_tiny_patch4_window7_224',
     'SwinTransformer embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=7, mlp_ratio=4, '
     'qkv_bias=True, patch_size=4, patch_norm=True, use_abs_pos_embed=False'),
    ('model.backbone.pretrained', 'checkpoints/swin_tiny_patch4_window7_224.ms_in1k.safetensors',
     "init_cfg checkpoint swin_tiny_patch4_window7_224_20220317-1cdeb081.pth (the official Swin-T ImageNet-1k)"),
    ('model.backbone.out_indices', (0, 1, 2, 3), 'backbone.out_indices (each through norm{i})'),
    ('model.backbone.drop_path_rate', 0.3, 'backbone.drop_path_rate'),
    ('model.backbone.window_layout', 'mmseg', 'ShiftWindowMSA pads to window multiples, then rolls'),
    ('model.neck.type', 'PyramidLevels', 'no neck: the stage maps go to the heads'),
    ('model.decode_head.type', 'UPerHead', "decode_head.type='UPerHead'"),
    ('model.decode_head.in_channels', [96, 192, 384, 768], 'decode_head.in_channels, in_index=[0, 1, 2, 3]'),
    ('model.decode_head.channels', 512, 'decode_head.channels'),
    ('model.decode_head.pool_scales', (1, 2, 3, 6), 'decode_head.pool_scales'),
    ('model.decode_head.dropout', 0.1, 'decode_head.dropout_ratio'),
    ('model.decode_head.num_classes', 150, 'decode_head.num_classes'),
    ('model.decode_head.init', 'mmseg', "ConvModule kaiming init; init_cfg Normal std=0.01 override conv_seg"),
    ('model.auxiliary_head.type', 'FCNHead', "auxiliary_head.type='FCNHead'"),
    ('model.auxiliary_head.in_channels', 384, 'auxiliary_head.in_channels'),
    ('model.auxiliary_head.in_index', 2, 'auxiliary_head.in_index'),
    ('model.auxiliary_head.channels', 256, 'auxiliary_head.channels'),
    ('model.auxiliary_head.num_convs', 1, 'auxiliary_head.num_convs'),
    ('model.auxiliary_head.kernel_size', 3, 'FCNHead kernel_size default 3'),
    ('model.auxiliary_head.concat_input', False, 'auxiliary_head.concat_input'),
    ('model.auxiliary_head.dropout', 0.1, 'auxiliary_head.dropout_ratio'),
    ('model.auxiliary_head.num_classes', 150, 'auxiliary_head.num_classes'),
    ('model.auxiliary_head.init', 'mmseg', "ConvModule kaiming init; init_cfg Normal std=0.01 override conv_seg"),
    ('model.aux_weight', 0.4, 'auxiliary_head.loss_decode.loss_weight'),
    ('model.loss.type', 'CrossEntropyLoss', "loss_decode type='CrossEntropyLoss', use_sigmoid=False, weight 1.0"),
    ('model.loss.avg_non_ignore', False, 'CrossEntropyLoss avg_non_ignore default False'),
    ('model.loss.ignore_index', 255, 'decode_head ignore_index default 255'),
    ('model.test_cfg.mode', 'whole', "test_cfg=dict(mode='whole')"),
    ('model.test_cfg.padding', 'resize', 'predict_by_feat resizes the stride-4 logits to img_shape'),
    ('sync_bn', 'torch', "norm_cfg=dict(type='SyncBN') in both heads"),
    ('optim_wrapper.type', 'OptimWrapper', 'optim_wrapper.type'),
    ('optim_wrapper.optimizer.type', 'AdamW', 'optimizer.type'),
    ('optim_wrapper.optimizer.lr', 6e-5, 'optimizer.lr'),
    ('optim_wrapper.optimizer.betas', (0.9, 0.999), 'optimizer.betas'),
    ('optim_wrapper.optimizer.weight_decay', 0.01, 'optimizer.weight_decay'),
    ('optim_wrapper.paramwise_cfg.custom_keys', {'pos_bias': {'decay_mult': 0.0}, 'norm': {'decay_mult': 0.0}},
     "custom_keys absolute_pos_embed (no parameter), relative_position_bias_table, norm (test below)"),
    ('param_scheduler', [dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
                         dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500, end=160000)],
     'param_scheduler'),
    ('train_cfg', dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000), 'train_cfg'),
    ('effective_batch_size', 16, '8 GPUs x train_dataloader.batch_size 2'),
    ('train_dataloader.batch_size', 2, 'train_dataloader.batch_size'),
    ('train_dataloader.sampler', dict(type='InfiniteSampler', shuffle=True), 'train_dataloader.sampler'),
    ('train_dataloader.dataset.type', 'ADE20KDataset', "ADE20KDataset, LoadAnnotations(reduce_zero_label=True)"),
    ('val_dataloader.batch_size', 1, 'val_dataloader.batch_size'),
    ('val_evaluator', dict(type='IoUMetric', ignore_index=255), "IoUMetric iou_metrics=['mIoU']"),
    ('default_hooks.checkpoint.interval', 16000, 'default_hooks.checkpoint.interval, by_epoch=False'),
    ('default_hooks.logger.interval', 50, 'default_hooks.logger.interval'),
]
#: mmseg's optimizer keys without weight decay (``paramwise_cfg.custom_keys``, matched as substrings of the names).
MMSEG_NO_DECAY = ('absolute_pos_embed', 'relative_position_bias_table', 'norm')


def test_recipe_resolves_to_mmsegs_values_key_by_key():
    cfg = Config.fromfile(str(CONFIGS / 'upernet_swint_ade20k.py'))
    wrong = [f'{key}: {lookup(cfg, key)!r}, mmseg {value!r} ({source})' for key, value, source in MMSEG_RECIPE
             if plain(lookup(cfg, key)) != plain(value)]
    assert not wrong, '\n'.join(wrong)
    for pipeline, facts in ((cfg.train_dataloader.dataset.pipeline, MMSEG_TRAIN_PIPELINE),
                            (cfg.test_dataloader.dataset.pipeline, MMSEG_TEST_PIPELINE)):
        assert [t['type'] for t in pipeline] == [name for name, _ in facts]
        for step, (name, options) in zip(pipeline, facts):
            assert plain({k: step[k] for k in options}) == plain(options), name
    from zoo.registry import get_variant  # the Swin-T the name builds: mmseg's sizes
    args = get_variant('swin_tiny_patch4_window7_224').kwargs
    assert {k: args[k] for k in ('embed_dim', 'depths', 'num_heads', 'window')} == \
        dict(embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window=7)


# ------------------------------------------------------------------------------------------ tiny model + mmseg state
def tiny_model(seed: int = 0) -> torch.nn.Module:
    """The recipe's model at a CPU size: Swin of width 8 (1/1/2/1 blocks), 16-wide heads, 5 classes; random
    weights and BatchNorm statistics, eval mode."""
    cfg = Config.fromfile(str(CONFIGS / 'upernet_swint_ade20k.py'))
    cfg.model.backbone.update(pretrained=None, embed_dim=8, depths=(1, 1, 2, 1), num_heads=(1, 2, 2, 4))
    cfg.model.decode_head.update(in_channels=[8, 16, 32, 64], channels=16, num_classes=5)
    cfg.model.auxiliary_head.update(in_channels=32, channels=8, num_classes=5)
    torch.manual_seed(seed)
    model = perturb_(heads.MODELS.build(cfg.model), 0.05)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.1)
            module.running_var.uniform_(0.5, 2.0)
    return model.eval()


def unfold_positions(merging: torch.nn.Module, channels: int) -> torch.Tensor:
    """perm such that our merging's concatenated vector is mmseg's ``nn.Unfold(2, stride=2)`` vector at perm: both
    run on one 2x2 map of distinct values (ours with its norm taken out and an identity reduction)."""
    probe = type(merging)(channels, 4 * channels)
    probe.norm = torch.nn.Identity()
    with torch.no_grad():
        probe.reduction.weight.copy_(torch.eye(4 * channels))
        x = torch.arange(4 * channels, dtype=torch.float32).reshape(1, 2, 2, channels)  # 'b h w c'
        ours = probe(x).flatten()
    theirs = F.unfold(x.permute(0, 3, 1, 2), kernel_size=2, stride=2).flatten()
    return torch.stack([torch.nonzero(theirs == v)[0, 0] for v in ours])


def to_mmseg(model: torch.nn.Module) -> dict:
    """Our model's state in mmseg's UperNet Swin layout (names and stored shapes of mmseg's modules), with the
    buffers mmseg's checkpoints carry (``relative_position_index``) made by hand."""
    out = {}
    for key, value in model.state_dict().items():
        if not key.startswith('backbone.'):
            out[key] = value  # the heads' names are mmseg's
            continue
        name = key[len('backbone.'):]
        parts = name.split('.')
        if name.startswith('patch_embed.proj.'):
            out['backbone.patch_embed.projection.' + parts[-1]] = value
        elif name.startswith('patch_embed.norm.'):
            out['backbone.' + name] = value
        elif name.startswith('out_norms.'):
            out[f'backbone.norm{parts[1]}.{parts[2]}'] = value
        elif parts[2] == 'downsample':  # ours: start of stage i; mmseg: end of stage i - 1, Unfold-ordered
            stage = int(parts[1])
            merging = model.backbone.layers[stage].downsample
            perm = unfold_positions(merging, merging.reduction.in_features // 4)
            mm = torch.empty_like(value)
            mm[..., perm] = value
            out[f'backbone.stages.{stage - 1}.downsample.{".".join(parts[3:])}'] = mm
        else:  # layers.{i}.blocks.{j}.<part>
            stage, block, rest = parts[1], parts[3], '.'.join(parts[4:])
            prefix = f'backbone.stages.{stage}.blocks.{block}.'
            if rest == 'attn.pos_bias.table':  # 'heads dy dx' -> '(dy dx) heads'
                out[prefix + 'attn.w_msa.relative_position_bias_table'] = value.flatten(1).T.contiguous()
                window = (value.shape[1] + 1) // 2
                out[prefix + 'attn.w_msa.relative_position_index'] = torch.randint(
                    0, value.shape[1] * value.shape[2], (window * window, window * window))
            elif rest.startswith('attn.'):
                out[prefix + 'attn.w_msa.' + rest[len('attn.'):]] = value
            elif rest.startswith('mlp.fc1.'):
                out[prefix + 'ffn.layers.0.0.' + parts[-1]] = value
            elif rest.startswith('mlp.fc2.'):
                out[prefix + 'ffn.layers.1.' + parts[-1]] = value
            else:  # norm1 / norm2
                out[prefix + rest] = value
    return out


def test_an_mmseg_upernet_swin_checkpoint_loads_with_equal_outputs(tmp_path):
    model = tiny_model()
    state = to_mmseg(model)
    assert any(k.startswith('backbone.stages.0.blocks.0.attn.w_msa.') for k in state)
    assert 'backbone.stages.0.downsample.reduction.weight' in state and 'backbone.norm3.weight' in state
    path = tmp_path / 'upernet_swin_mmseg.pth'
    torch.save({'meta': {'iter': 160000}, 'state_dict': state}, path)
    assert task_checkpoint_layout(state, model) == 'mmseg' and is_mmseg_upernet(state)
    fresh = tiny_model(seed=1)
    report = load_task_checkpoint(fresh, path)
    assert report.format == 'mmseg' and not (report.missing or report.unexpected or report.mismatched)
    x = torch.randn(1, 3, 96, 160)
    with torch.no_grad():
        assert torch.equal(fresh(x, mode='tensor'), model(x, mode='tensor'))
    assert set(from_mmseg(state, None)) == set(model.state_dict())


def test_this_projects_upernet_layout_is_not_taken_for_mmsegs():
    model = tiny_model()
    state = model.state_dict()
    assert task_checkpoint_layout(state, model) == 'zoo' and not is_mmseg_upernet(state)


def test_no_decay_parameters_are_mmsegs_under_our_names():
    """The recipe's custom keys on our names exclude exactly what mmseg's exclude on its names."""
    model = tiny_model()
    cfg = Config.fromfile(str(CONFIGS / 'upernet_swint_ade20k.py'))
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    names = {id(p): n for n, p in model.named_parameters()}
    ours = {names[id(p)] for group in wrapper.optimizer.param_groups if group['weight_decay'] == 0.0
            for p in group['params']}
    theirs_in_mmseg = {k: v for k, v in to_mmseg(model).items() if any(key in k for key in MMSEG_NO_DECAY)}
    theirs = set(upernet_from_mmseg(theirs_in_mmseg)) & set(names.values())
    assert ours == theirs and any('pos_bias' in k for k in ours) and any('out_norms' in k for k in ours)
    assert not any('.bn.' in k for k in ours)  # the heads' BatchNorms are decayed, as mmseg's 'bn'


@pytest.mark.parametrize('size', [(64, 64), (96, 160)])
def test_predict_gives_the_semantic_map_at_the_image_size(size):
    from mmengine.structures import BaseDataElement
    model = tiny_model()
    x = torch.randn(1, 3, *size)
    sample = BaseDataElement(metainfo=dict(img_shape=size, ori_shape=size))
    with torch.no_grad():
        logits = model(x, mode='tensor')
        pred = model(x, [sample], mode='predict')[0]
    assert logits.shape == (1, 5, *size)
    assert torch.equal(pred.pred_sem_seg.data, logits[0].argmax(0, keepdim=True))


def test_mmsegs_swin_backbone_file_loads_by_format():
    """mmseg's pretrain files (``swin_tiny_patch4_window7_224_20220317-1cdeb081.pth``) are its Swin layout alone."""
    import zoo
    model = tiny_model()
    backbone = {k[len('backbone.'):]: v for k, v in to_mmseg(model).items() if k.startswith('backbone.')}
    fresh = tiny_model(seed=1).backbone
    report = zoo.load_pretrained(fresh, backbone, format='mmseg')
    assert not (report.missing or report.unexpected or report.mismatched)
    assert all(torch.equal(v, model.backbone.state_dict()[k]) for k, v in fresh.state_dict().items())
