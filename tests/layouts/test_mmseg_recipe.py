"""configs/dpt_vitb_ade20k.py is mmseg's DPT ViT-B/16 ADE20K recipe, key by key, and mmseg's checkpoints load.

Facts about mmseg (mmsegmentation 1.2.2, ``configs/dpt/dpt_vit-b16_8xb2-160k_ade20k-512x512.py`` resolved with its
bases, and the code it builds: ``mmseg/models/backbones/vit.py``, ``decode_heads/dpt_head.py``, the CE loss, mmcv's
``ConvModule``) are written here as a table and as a functional forward pass over a state dict in mmseg's key
layout; the project's config and parts are checked against them.
"""
from __future__ import annotations

import copy
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.structures import BaseDataElement, PixelData

import heads
from heads.engine.config.diff import differing_keys
from heads.engine.distributed.effective_batch import StepParamSchedulerHook, apply_effective_batch
from zoo.weights import CheckpointMismatchError

from ..reference import shared_data

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / 'configs'
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]

# mmseg's resolved recipe, as our config spells it: (our key, mmseg's value, mmseg's key / where it comes from).
MMSEG_RECIPE = [
    ('model.type', 'Segmentor', "model.type='EncoderDecoder'"),
    ('model.data_preprocessor.mean', MEAN, 'data_preprocessor.mean'),
    ('model.data_preprocessor.std', STD, 'data_preprocessor.std (bgr_to_rgb=True: mmseg reads BGR, we read RGB)'),
    ('model.data_preprocessor.pad_val', 0, 'data_preprocessor.pad_val'),
    ('model.data_preprocessor.seg_pad_val', 255, 'data_preprocessor.seg_pad_val'),
    ('model.data_preprocessor.size', (512, 512), 'data_preprocessor.size=crop_size (training batches)'),
    ('model.data_preprocessor.size_divisor', 16, "test: backbone patch_pad='corner' pads to patch_size=16"),
    ('model.backbone.name', 'vit_base_patch16_224', 'VisionTransformer img_size=224, embed_dims=768, 12 x 12 heads'),
    ('model.backbone.pretrained', 'checkpoints/vit_base_patch16_224.orig_in21k_ft_in1k.safetensors',
     "pretrained='pretrain/vit-b16_p16_224-80ecf9dd.pth' (jx_vit_base_p16_224-80ecf9dd, timm's orig_in21k_ft_in1k)"),
    ('model.backbone.out_indices', (2, 5, 8, 11), 'backbone.out_indices; final_norm=False, output_cls_token=True'),
    ('model.backbone.drop_path_rate', 0.0, 'VisionTransformer drop_path_rate default 0.0'),
    ('model.backbone.patch_bias', False, 'VisionTransformer patch_bias default False (1.x)'),
    ('model.backbone.norm_eps', 1e-5, "norm_cfg=dict(type='LN'): nn.LayerNorm eps 1e-5"),
    ('model.backbone.pos_antialias', False, "interpolate_mode='bicubic', F.interpolate without antialias"),
    ('model.neck.type', 'DPTNeck', 'DPTHead.reassemble_blocks + convs + fusion_blocks'),
    ('model.neck.readout', 'project', "readout_type='project'"),
    ('model.neck.hidden_channels', (96, 192, 384, 768), 'post_process_channels'),
    ('model.neck.fusion_channels', 256, 'channels'),
    ('model.neck.fusion_batch_norm', True, "norm_cfg=dict(type='SyncBN') in PreActResidualConvUnit, bias=False"),
    ('model.neck.deepest_skip_unit', False, 'fusion_blocks[0].res_conv_unit1 = None'),
    ('model.neck.init', 'mmseg', 'ConvModule.init_weights: kaiming_init (fan_out, relu), norm (1, 0)'),
    ('model.decode_head.type', 'DPTSegHead', 'DPTHead.project (ConvModule 3x3 + SyncBN + ReLU) + cls_seg'),
    ('model.decode_head.num_classes', 150, 'num_classes'),
    ('model.decode_head.in_channels', 256, 'channels'),
    ('model.decode_head.dropout', 0.1, 'BaseDecodeHead dropout_ratio default 0.1'),
    ('model.decode_head.upsample', False, 'loss_by_feat / predict_by_feat resize the stride-2 logits'),
    ('model.decode_head.init', 'mmseg', "init_cfg=dict(type='Normal', std=0.01, override=dict(name='conv_seg'))"),
    ('model.auxiliary_head', None, 'auxiliary_head=None'),
    ('model.loss.type', 'CrossEntropyLoss', "loss_decode type='CrossEntropyLoss', use_sigmoid=False"),
    ('model.loss.avg_non_ignore', False, 'CrossEntropyLoss avg_non_ignore default False'),
    ('model.loss.ignore_index', 255, 'decode_head ignore_index default 255'),
    ('model.test_cfg.mode', 'whole', "test_cfg=dict(mode='whole')"),
    ('model.test_cfg.padding', 'resize', 'predict_by_feat resizes to img_shape; ViT padded internally'),
    ('sync_bn', 'torch', "norm_cfg=dict(type='SyncBN')"),
    ('optim_wrapper.type', 'OptimWrapper', 'optim_wrapper.type'),
    ('optim_wrapper.optimizer.type', 'AdamW', 'optimizer.type'),
    ('optim_wrapper.optimizer.lr', 6e-5, 'optimizer.lr'),
    ('optim_wrapper.optimizer.betas', (0.9, 0.999), 'optimizer.betas'),
    ('optim_wrapper.optimizer.weight_decay', 0.01, 'optimizer.weight_decay'),
    ('optim_wrapper.paramwise_cfg.custom_keys', {'pos_embed': {'decay_mult': 0.0}, 'prefix': {'decay_mult': 0.0}},
     "custom_keys pos_embed, cls_token (= prefix.cls here), norm (matches no parameter of mmseg's model)"),
    ('param_scheduler', [dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
                         dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500, end=160000)],
     'param_scheduler'),
    ('train_cfg', dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000), 'train_cfg'),
    ('effective_batch_size', 16, '8 GPUs x train_dataloader.batch_size 2'),
    ('train_dataloader.batch_size', 2, 'train_dataloader.batch_size'),
    ('train_dataloader.num_workers', 2, 'train_dataloader.num_workers'),
    ('train_dataloader.sampler', dict(type='InfiniteSampler', shuffle=True), 'train_dataloader.sampler'),
    ('train_dataloader.dataset.type', 'ADE20KDataset', "ADE20KDataset, LoadAnnotations(reduce_zero_label=True)"),
    ('val_dataloader.batch_size', 1, 'val_dataloader.batch_size'),
    ('val_evaluator', dict(type='IoUMetric', ignore_index=255), "IoUMetric iou_metrics=['mIoU']"),
    ('default_hooks.checkpoint.interval', 16000, 'default_hooks.checkpoint.interval, by_epoch=False'),
    ('default_hooks.logger.interval', 50, 'default_hooks.logger.interval'),
]
MMSEG_TRAIN_PIPELINE = [
    ('LoadImage', {}), ('LoadAnnotations', {}),
    ('RandomResize', dict(scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True)),
    ('RandomCrop', dict(crop_size=(512, 512), cat_max_ratio=0.75)),
    ('RandomFlip', dict(prob=0.5)), ('PhotoMetricDistortion', {}), ('PackDenseInputs', {})]
MMSEG_TEST_PIPELINE = [('LoadImage', {}), ('Resize', dict(scale=(2048, 512), keep_ratio=True)),
                       ('LoadAnnotations', {}), ('PackDenseInputs', {})]
#: Where configs/dpt_vitb_ade20k_ours.py takes this project's own choices (docs/dense.md says why each).
OURS_DIFFER = {
    'model.backbone.drop_path_rate', 'model.backbone.pretrained', 'model.backbone.patch_bias',
    'model.backbone.norm_eps', 'model.backbone.pos_antialias', 'model.data_preprocessor.size.0',
    'model.data_preprocessor.size.1', 'model.data_preprocessor.size_divisor', 'model.neck.fusion_batch_norm',
    'model.neck.deepest_skip_unit', 'model.neck.init', 'model.decode_head.upsample', 'model.decode_head.init',
    'model.loss.avg_non_ignore', 'model.test_cfg.padding', 'optim_wrapper.paramwise_cfg.custom_keys.norm.decay_mult'}


def plain(value):
    """Config values as plain Python (ConfigDicts as dicts, lists and tuples compared alike)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def lookup(cfg, dotted: str):
    node = cfg
    for part in dotted.split('.'):
        node = node[int(part)] if isinstance(node, (list, tuple)) else node[part]
    return node


def test_recipe_resolves_to_mmsegs_values_key_by_key():
    cfg = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    wrong = [f'{key}: {lookup(cfg, key)!r}, mmseg {value!r} ({source})' for key, value, source in MMSEG_RECIPE
             if plain(lookup(cfg, key)) != plain(value)]
    assert not wrong, '\n'.join(wrong)
    for pipeline, facts in ((cfg.train_dataloader.dataset.pipeline, MMSEG_TRAIN_PIPELINE),
                            (cfg.test_dataloader.dataset.pipeline, MMSEG_TEST_PIPELINE)):
        assert [t['type'] for t in pipeline] == [name for name, _ in facts]
        for step, (name, options) in zip(pipeline, facts):
            assert plain({k: step[k] for k in options}) == plain(options), name
    from zoo.registry import get_variant  # the ViT-B/16 the name builds: mmseg's sizes
    args = get_variant('vit_base_patch16_224').kwargs
    assert {k: args[k] for k in ('embed_dim', 'depth', 'num_heads', 'patch_size')} == \
        dict(embed_dim=768, depth=12, num_heads=12, patch_size=16)


def test_ours_differs_from_the_recipe_only_in_its_named_choices():
    recipe = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    ours = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k_ours.py'))
    assert set(differing_keys(recipe, ours)) == OURS_DIFFER


# ------------------------------------------------------------------------------------------ tiny model + mmseg state
D, DEPTH, HEADS, GRID, HIDDEN, C, K = 32, 4, 2, (2, 2), (8, 8, 16, 16), 16, 5


def tiny_cfg(changes=()) -> Config:
    """The recipe at a CPU size (4 blocks of width 32, 224 -> 32 build size, a 16-wide neck, 5 classes), with
    ``changes`` = [(dotted key under model, value)] applied."""
    cfg = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    cfg.model.backbone.update(pretrained=None, embed_dim=D, depth=DEPTH, num_heads=HEADS,
                              out_indices=tuple(range(DEPTH)), img_size=16 * GRID[0])
    cfg.model.neck.update(hidden_channels=HIDDEN, fusion_channels=C)
    cfg.model.decode_head.update(in_channels=C, num_classes=K)
    for key, value in changes:
        *path, last = key.split('.')
        node = cfg.model
        for part in path:
            node = node[part]
        node[last] = value
    return cfg


def mmseg_state(patch_bias: bool = False, seed: int = 0) -> OrderedDict:
    """A random state dict with mmseg's DPT ViT key names and stored shapes (tiny widths)."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape, std=None):
        if std is None:
            std = 0.2 if len(shape) == 1 else float(np.prod(shape[1:])) ** -0.5
        return torch.randn(*shape, generator=gen) * std

    def bn(prefix):
        state[prefix + 'weight'], state[prefix + 'bias'] = 1 + rand(C, std=0.1), rand(C, std=0.1)
        state[prefix + 'running_mean'] = rand(C, std=0.1)
        state[prefix + 'running_var'] = 0.5 + torch.rand(C, generator=gen)
        state[prefix + 'num_batches_tracked'] = torch.tensor(1000 + len(state))  # distinct: each has one place

    state = OrderedDict()
    state['backbone.cls_token'] = rand(1, 1, D, std=0.02)
    state['backbone.pos_embed'] = rand(1, 1 + GRID[0] * GRID[1], D, std=0.02)
    state['backbone.patch_embed.projection.weight'] = rand(D, 3, 16, 16, std=1e-3)  # small tokens: LN eps counts
    if patch_bias:
        state['backbone.patch_embed.projection.bias'] = rand(D, std=0.01)
    for i in range(DEPTH):
        p = f'backbone.layers.{i}.'
        for norm in ('ln1', 'ln2'):
            state[f'{p}{norm}.weight'], state[f'{p}{norm}.bias'] = 1 + rand(D, std=0.1), rand(D, std=0.1)
        state[p + 'attn.attn.in_proj_weight'], state[p + 'attn.attn.in_proj_bias'] = rand(3 * D, D), rand(3 * D)
        state[p + 'attn.attn.out_proj.weight'], state[p + 'attn.attn.out_proj.bias'] = rand(D, D), rand(D)
        state[p + 'ffn.layers.0.0.weight'], state[p + 'ffn.layers.0.0.bias'] = rand(4 * D, D), rand(4 * D)
        state[p + 'ffn.layers.1.weight'], state[p + 'ffn.layers.1.bias'] = rand(D, 4 * D), rand(D)
    h = 'decode_head.'
    for i, ch in enumerate(HIDDEN):
        state[f'{h}reassemble_blocks.readout_projects.{i}.0.weight'] = rand(D, 2 * D)
        state[f'{h}reassemble_blocks.readout_projects.{i}.0.bias'] = rand(D)
        state[f'{h}reassemble_blocks.projects.{i}.conv.weight'] = rand(ch, D, 1, 1)
        state[f'{h}reassemble_blocks.projects.{i}.conv.bias'] = rand(ch)
    for i, k in ((0, 4), (1, 2)):  # ConvTranspose2d weights 'in out k k'
        state[f'{h}reassemble_blocks.resize_layers.{i}.weight'] = rand(HIDDEN[i], HIDDEN[i], k, k, std=0.5)
        state[f'{h}reassemble_blocks.resize_layers.{i}.bias'] = rand(HIDDEN[i])
    state[f'{h}reassemble_blocks.resize_layers.3.weight'] = rand(HIDDEN[3], HIDDEN[3], 3, 3)
    state[f'{h}reassemble_blocks.resize_layers.3.bias'] = rand(HIDDEN[3])
    for i, ch in enumerate(HIDDEN):
        state[f'{h}convs.{i}.conv.weight'] = rand(C, ch, 3, 3)
    for i in range(4):
        for unit in ((2,) if i == 0 else (1, 2)):
            for conv in (1, 2):
                q = f'{h}fusion_blocks.{i}.res_conv_unit{unit}.conv{conv}.'
                state[q + 'conv.weight'] = rand(C, C, 3, 3)
                bn(q + 'bn.')
        state[f'{h}fusion_blocks.{i}.project.conv.weight'] = rand(C, C, 1, 1)
        state[f'{h}fusion_blocks.{i}.project.conv.bias'] = rand(C)
    state[h + 'project.conv.weight'] = rand(C, C, 3, 3)
    bn(h + 'project.bn.')
    state[h + 'conv_seg.weight'], state[h + 'conv_seg.bias'] = rand(K, C, 1, 1), rand(K)
    return state


def mmseg_forward(s: dict, img: torch.Tensor) -> torch.Tensor:
    """mmseg's whole-image inference, written out from its code over its state dict: 'b 3 H W' (normalised) ->
    logits 'b K H W' at the unpadded size."""
    height, width = img.shape[-2:]
    x = F.pad(img, (0, -width % 16, 0, -height % 16))  # PatchEmbed AdaptivePadding 'corner'
    x = F.conv2d(x, s['backbone.patch_embed.projection.weight'], s.get('backbone.patch_embed.projection.bias'),
                 stride=16)
    h, w = x.shape[-2:]
    x = torch.cat([s['backbone.cls_token'].expand(len(x), -1, -1), x.flatten(2).transpose(1, 2)], dim=1)
    pos = s['backbone.pos_embed']
    grid = pos[:, 1:].reshape(1, *GRID, D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(h, w), mode='bicubic', align_corners=False)  # resize_pos_embed
    x = x + torch.cat([pos[:, :1], grid.flatten(2).transpose(1, 2)], dim=1)
    taps = []
    for i in range(DEPTH):
        p = f'backbone.layers.{i}.'
        attn = torch.nn.MultiheadAttention(D, HEADS, batch_first=True)
        attn.load_state_dict({'in_proj_weight': s[p + 'attn.attn.in_proj_weight'],
                              'in_proj_bias': s[p + 'attn.attn.in_proj_bias'],
                              'out_proj.weight': s[p + 'attn.attn.out_proj.weight'],
                              'out_proj.bias': s[p + 'attn.attn.out_proj.bias']})
        y = F.layer_norm(x, (D,), s[p + 'ln1.weight'], s[p + 'ln1.bias'], eps=1e-5)
        x = x + attn(y, y, y, need_weights=False)[0]
        y = F.layer_norm(x, (D,), s[p + 'ln2.weight'], s[p + 'ln2.bias'], eps=1e-5)
        y = F.linear(F.gelu(F.linear(y, s[p + 'ffn.layers.0.0.weight'], s[p + 'ffn.layers.0.0.bias'])),
                     s[p + 'ffn.layers.1.weight'], s[p + 'ffn.layers.1.bias'])
        x = x + y
        taps.append(x)
    hd = 'decode_head.'
    feats = []
    for i, t in enumerate(taps):  # ReassembleBlocks, readout 'project'
        tokens, cls = t[:, 1:], t[:, :1].expand(-1, h * w, -1)
        r = F.gelu(F.linear(torch.cat([tokens, cls], -1), s[f'{hd}reassemble_blocks.readout_projects.{i}.0.weight'],
                            s[f'{hd}reassemble_blocks.readout_projects.{i}.0.bias']))
        f = r.transpose(1, 2).reshape(len(x), D, h, w)
        f = F.conv2d(f, s[f'{hd}reassemble_blocks.projects.{i}.conv.weight'],
                     s[f'{hd}reassemble_blocks.projects.{i}.conv.bias'])
        rw, rb = s.get(f'{hd}reassemble_blocks.resize_layers.{i}.weight'), \
            s.get(f'{hd}reassemble_blocks.resize_layers.{i}.bias')
        f = {0: lambda: F.conv_transpose2d(f, rw, rb, stride=4), 1: lambda: F.conv_transpose2d(f, rw, rb, stride=2),
             2: lambda: f, 3: lambda: F.conv2d(f, rw, rb, stride=2, padding=1)}[i]()
        feats.append(F.conv2d(f, s[f'{hd}convs.{i}.conv.weight'], padding=1))

    def bn(v, p):
        return F.batch_norm(v, s[p + 'running_mean'], s[p + 'running_var'], s[p + 'weight'], s[p + 'bias'],
                            training=False, eps=1e-5)

    def unit(v, p):  # PreActResidualConvUnit: (act, conv, norm) twice, plus the input
        y = bn(F.conv2d(F.relu(v), s[p + 'conv1.conv.weight'], padding=1), p + 'conv1.bn.')
        return bn(F.conv2d(F.relu(y), s[p + 'conv2.conv.weight'], padding=1), p + 'conv2.bn.') + v

    def fusion(i, v, skip=None):  # FeatureFusionBlock
        p = f'{hd}fusion_blocks.{i}.'
        if skip is not None:
            if skip.shape != v.shape:
                skip = F.interpolate(skip, size=v.shape[-2:], mode='bilinear', align_corners=False)
            v = v + unit(skip, p + 'res_conv_unit1.')
        v = F.interpolate(unit(v, p + 'res_conv_unit2.'), scale_factor=2, mode='bilinear', align_corners=True)
        return F.conv2d(v, s[p + 'project.conv.weight'], s[p + 'project.conv.bias'])

    out = fusion(0, feats[-1])
    for i in range(1, 4):
        out = fusion(i, out, feats[-(i + 1)])
    out = F.relu(bn(F.conv2d(out, s[hd + 'project.conv.weight'], padding=1), hd + 'project.bn.'))
    out = F.conv2d(out, s[hd + 'conv_seg.weight'], s[hd + 'conv_seg.bias'])  # cls_seg (dropout off in eval)
    return F.interpolate(out, size=(height, width), mode='bilinear', align_corners=False)  # to img_shape


def save_mmseg_checkpoint(path: Path, state: OrderedDict) -> Path:
    """As mmseg publishes them (tools/publish_model.py): meta + state_dict, no optimizer."""
    meta = {'mmseg_version': '0.17.0', 'config': "model = dict(type='EncoderDecoder', ...)", 'iter': 160000,
            'epoch': 1, 'seed': 0, 'exp_name': 'dpt_vit-b16_512x512_160k_ade20k.py', 'env_info': 'sys.platform: linux',
            'CLASSES': tuple(f'class{i}' for i in range(K)), 'PALETTE': [[i, 2 * i, 3 * i] for i in range(K)],
            'hook_msgs': {}}
    torch.save({'meta': meta, 'state_dict': state}, path)
    return path


IMAGE = np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)  # padded to 48x64: the grid is 3x4


def normalised(image: np.ndarray) -> torch.Tensor:
    x = torch.from_numpy(image).permute(2, 0, 1).float()
    return ((x - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None])[None]


def our_logits(model, image: np.ndarray) -> torch.Tensor:
    sample = BaseDataElement(metainfo={'ori_shape': image.shape[:2]})
    data = model.data_preprocessor({'inputs': [torch.from_numpy(image).permute(2, 0, 1)], 'data_samples': [sample]})
    with torch.no_grad():
        return model(data['inputs'], data['data_samples'], mode='predict')[0].seg_logits.data


@pytest.mark.parametrize('patch_bias', [False, True], ids=['mmseg-1.x', 'published-0.x-with-patch-bias'])
def test_mmseg_checkpoint_loads_through_predictor_and_load_from_and_matches_mmsegs_forward(patch_bias, tmp_path):
    state = mmseg_state(patch_bias)
    path = save_mmseg_checkpoint(tmp_path / 'dpt_mmseg.pth', state)
    cfg = tiny_cfg([('backbone.patch_bias', True)] if patch_bias else [])
    predictor = heads.Predictor(cfg, path)
    model = predictor.model
    ours = model.state_dict()
    assert len(ours) == len(state)  # no key left over on either side (the load itself is strict)
    unplaced = [k for k, v in state.items() if sum(torch.equal(v, o) for o in ours.values()) != 1]
    assert not unplaced, unplaced  # each mmseg tensor is in exactly one place here
    with torch.no_grad():
        reference = mmseg_forward(state, normalised(IMAGE))[0]
    logits = our_logits(model, IMAGE)
    assert logits.shape == reference.shape == (K, 40, 56)
    assert (logits - reference).abs().max() < 1e-4
    assert np.array_equal(predictor(IMAGE), reference.argmax(0).numpy())

    from heads.engine import ZooRunner  # load_from: the Runner's path (tools/train.py, tools/test.py)
    cfg.work_dir, cfg.load_from = str(tmp_path / 'work'), str(path)
    runner = ZooRunner.from_cfg(cfg)
    runner.load_or_resume()
    assert all(torch.equal(v, ours[k]) for k, v in runner.model.state_dict().items())


def test_published_checkpoint_into_a_model_without_patch_bias_says_which_option_takes_it(tmp_path):
    path = save_mmseg_checkpoint(tmp_path / 'published.pth', mmseg_state(patch_bias=True))
    with pytest.raises(CheckpointMismatchError, match='patch_bias=True'):
        heads.Predictor(tiny_cfg(), path)


@pytest.mark.parametrize('change', [
    ('neck.fusion_batch_norm', False), ('neck.deepest_skip_unit', True), ('backbone.patch_bias', True)])
def test_without_each_structural_option_mmsegs_checkpoint_does_not_fit(change, tmp_path):
    path = save_mmseg_checkpoint(tmp_path / 'dpt_mmseg.pth', mmseg_state())
    with pytest.raises(CheckpointMismatchError):
        heads.Predictor(tiny_cfg([change]), path)


@pytest.mark.parametrize('change', [
    ('backbone.norm_eps', 1e-6), ('backbone.pos_antialias', True), ('decode_head.upsample', True),
    ('test_cfg.padding', 'crop'), ('data_preprocessor.size_divisor', 32)])
def test_without_each_numerical_option_the_forward_is_not_mmsegs(change, tmp_path):
    state = mmseg_state()
    path = save_mmseg_checkpoint(tmp_path / 'dpt_mmseg.pth', state)
    model = heads.Predictor(tiny_cfg([change]), path).model
    with torch.no_grad():
        reference = mmseg_forward(state, normalised(IMAGE))[0]
    assert (our_logits(model, IMAGE) - reference).abs().max() > 1e-3


# ------------------------------------------------------------------------------------------ training-side options
def labelled_batch(sizes, seed=0):
    """Images and labels (a third of the pixels ignored) of the given sizes, as the data pipeline packs them."""
    gen = np.random.default_rng(seed)
    inputs, samples = [], []
    for h, w in sizes:
        inputs.append(torch.from_numpy(gen.integers(0, 256, (3, h, w), dtype=np.uint8)))
        labels = gen.integers(0, K, (1, h, w))
        labels[gen.random((1, h, w)) < 1 / 3] = 255
        sample = BaseDataElement(metainfo={'ori_shape': (h, w)})
        sample.gt_sem_seg = PixelData(data=torch.from_numpy(labels))
        samples.append(sample)
    return {'inputs': inputs, 'data_samples': samples}


@pytest.mark.parametrize('change', [None, ('loss.avg_non_ignore', True), ('decode_head.upsample', True),
                                    ('data_preprocessor.size', None)])
def test_training_loss_is_mmsegs_and_each_option_matters(change, tmp_path):
    """mmseg: batches padded to ``size`` (64 here, 512 in the recipe; labels with 255), stride-2 logits resized
    straight to the label size (bilinear, align_corners=False), cross-entropy summed over the labelled pixels and
    divided by all pixels of the padded batch."""
    state = mmseg_state()
    path = save_mmseg_checkpoint(tmp_path / 'dpt_mmseg.pth', state)
    changes = [('data_preprocessor.size', (64, 64))] + ([change] if change else [])
    model = heads.Predictor(tiny_cfg(changes), path).model  # eval mode: BN running statistics, no dropout
    data = model.data_preprocessor(labelled_batch([(40, 56), (48, 40)]), training=True)
    with torch.no_grad():
        loss = model(data['inputs'], data['data_samples'], mode='loss')['loss_ce']
        raw = labelled_batch([(40, 56), (48, 40)])
        images = torch.cat([F.pad(normalised(i.permute(1, 2, 0).numpy()), (0, 64 - i.shape[2], 0, 64 - i.shape[1]))
                            for i in raw['inputs']])
        labels = torch.cat([F.pad(s.gt_sem_seg.data, (0, 64 - s.gt_sem_seg.data.shape[2], 0,
                                                      64 - s.gt_sem_seg.data.shape[1]), value=255)
                            for s in raw['data_samples']]).long()
        reference = F.cross_entropy(mmseg_forward(state, images), labels, ignore_index=255, reduction='none').mean()
    assert data['inputs'].shape[-2:] == (64, 64) or change == ('data_preprocessor.size', None)
    if change is None:
        assert abs(loss - reference) < 1e-5 * reference
    else:
        assert abs(loss - reference) > 1e-3 * reference


def test_mmseg_init_kaiming_convs_and_classifier_std_001():
    torch.manual_seed(0)
    cfg = tiny_cfg([('neck.fusion_channels', 64), ('decode_head.in_channels', 64), ('decode_head.num_classes', 150)])
    model, plain_model = heads.MODELS.build(cfg.model), heads.MODELS.build(tiny_cfg([
        ('neck.fusion_channels', 64), ('decode_head.in_channels', 64), ('decode_head.num_classes', 150),
        ('neck.init', 'torch'), ('decode_head.init', 'torch')]).model)
    for built, expect in ((model, True), (plain_model, False)):
        conv = built.neck.fusion[1].res1.conv1  # kaiming normal, fan_out = 64 * 3 * 3, ReLU gain
        ok = abs(conv.weight.std().item() / (2 / (64 * 9)) ** 0.5 - 1) < 0.05
        classifier = built.decode_head.head[4]
        ok &= abs(classifier.weight.std().item() / 0.01 - 1) < 0.05 and not classifier.bias.any()
        ok &= not built.neck.fusion[1].proj.bias.any() and not built.neck.reassemble[0].proj.bias.any()
        assert ok == expect


def test_weight_decay_exempts_what_mmsegs_keys_match_in_mmsegs_model():
    from mmengine.optim import build_optim_wrapper

    from heads.layouts.mmseg import dpt_from_mmseg
    cfg = tiny_cfg()
    model = heads.MODELS.build(cfg.model)
    groups = build_optim_wrapper(model, cfg.optim_wrapper).optimizer.param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    exempt = {names[id(p)] for g in groups if g['weight_decay'] == 0 for p in g['params']}
    assert all(g['weight_decay'] in (0, 0.01) for g in groups)
    mmseg_params = [k for k, v in mmseg_state().items() if v.is_floating_point() and 'running_' not in k]
    mmseg_exempt = [k for k in mmseg_params if any(key in k for key in ('pos_embed', 'cls_token', 'norm'))]
    assert exempt == set(dpt_from_mmseg(dict.fromkeys(mmseg_exempt))) == \
        {'backbone.pos_embed.weight', 'backbone.prefix.cls'}
    ours = tiny_cfg().optim_wrapper
    ours.paramwise_cfg.custom_keys['norm'] = dict(decay_mult=0.0)  # this project's choice: LayerNorms exempt too
    groups = build_optim_wrapper(model, ours).optimizer.param_groups
    assert len({names[id(p)] for g in groups if g['weight_decay'] == 0 for p in g['params']}) > 2


def test_deepest_fusion_block_without_skip_unit_leaves_no_parameter_without_gradient():
    for deepest_skip_unit in (False, True):
        model = heads.MODELS.build(tiny_cfg([('neck.deepest_skip_unit', deepest_skip_unit)]).model)
        data = model.data_preprocessor(labelled_batch([(32, 32)]), training=True)
        model(data['inputs'], data['data_samples'], mode='loss')['loss_ce'].backward()
        without = [n for n, p in model.named_parameters() if p.grad is None]
        # with the unit: its two convs and two BatchNorms (weight, bias) never take part in the loss
        assert without == ([f'neck.fusion.0.res1.{m}.{p}' for m, p in
                            (('conv1', 'weight'), ('bn1', 'weight'), ('bn1', 'bias'), ('conv2', 'weight'),
                             ('bn2', 'weight'), ('bn2', 'bias'))] if deepest_skip_unit else [])


# ------------------------------------------------------------------------------------------ effective batch
def test_accumulated_gradient_equals_the_big_batch_gradient():
    from mmengine.optim import OptimWrapper
    torch.manual_seed(0)
    model = heads.MODELS.build(tiny_cfg([('data_preprocessor.size', None)]).model).eval()  # BN: running stats
    data = model.data_preprocessor(labelled_batch([(32, 32)] * 8), training=True)
    results = []
    for steps in (1, 4):
        net = copy.deepcopy(model)
        wrapper = OptimWrapper(torch.optim.SGD(net.parameters(), lr=1.0), accumulative_counts=steps)
        wrapper.initialize_count_status(net, 0, steps)
        start = {n: p.detach().clone() for n, p in net.named_parameters()}
        for i in range(steps):
            part = slice(i * 8 // steps, (i + 1) * 8 // steps)
            loss = net(data['inputs'][part], data['data_samples'][part], mode='loss')['loss_ce']
            wrapper.update_params(loss)
        results.append({n: start[n] - p.detach() for n, p in net.named_parameters()})  # = the gradient (lr 1)
    big, accumulated = results
    scale = max(g.abs().max() for g in big.values())
    assert scale > 0 and max((big[n] - accumulated[n]).abs().max() for n in big) < 1e-5 * scale


def test_effective_batch_is_made_up_on_any_process_count_and_said():
    recipe = Config.fromfile(str(CONFIGS / 'dpt_vitb_ade20k.py'))
    one = copy.deepcopy(recipe)
    note = apply_effective_batch(one, world_size=1)
    assert one.optim_wrapper.accumulative_counts == 8
    assert (one.train_cfg.max_iters, one.train_cfg.val_interval, one.default_hooks.checkpoint.interval) == \
        (1280000, 128000, 128000)
    assert one.default_hooks.param_scheduler.type == 'StepParamSchedulerHook'
    assert one.param_scheduler[1].end == 160000  # the schedule stays in optimizer steps
    assert note.startswith('effective batch 16 = 1 process(es) x 2 images x 8 accumulated iterations')
    eight = copy.deepcopy(recipe)
    note = apply_effective_batch(eight, world_size=8)
    assert eight.optim_wrapper.accumulative_counts == 1 and eight.train_cfg.max_iters == 160000
    assert note.startswith('effective batch 16 = 8 process(es) x 2 images')
    with pytest.raises(ValueError, match='does not divide'):
        apply_effective_batch(copy.deepcopy(recipe), world_size=3)
    if not torch.cuda.is_available():
        two = copy.deepcopy(recipe)
        assert 'sync_bn dropped' in apply_effective_batch(two, world_size=2) and 'sync_bn' not in two


def test_learning_rate_follows_optimizer_steps_under_accumulation():
    from mmengine.hooks import ParamSchedulerHook
    from mmengine.optim import LinearLR, OptimWrapper

    def rates(steps, hook):
        param = torch.nn.Parameter(torch.zeros(1))
        wrapper = OptimWrapper(torch.optim.SGD([param], lr=1.0), accumulative_counts=steps)
        wrapper.initialize_count_status(torch.nn.Linear(1, 1), 0, 6 * steps)
        runner = type('Runner', (), {'optim_wrapper': wrapper, 'param_schedulers': [
            LinearLR(wrapper.optimizer, start_factor=0.1, by_epoch=False, begin=0, end=5)]})()
        seen = []
        for i in range(6 * steps):
            wrapper.update_params((param * 1.0).sum())
            if wrapper.should_update():
                seen.append(wrapper.get_lr()['lr'][0])
            hook.after_train_iter(runner, i)
        return seen

    expected = rates(1, ParamSchedulerHook())
    assert rates(4, StepParamSchedulerHook()) == pytest.approx(expected)
    assert rates(4, ParamSchedulerHook()) != pytest.approx(expected)


def test_mmseg_vit_files_load_as_backbone_weights():
    """vit2mmseg's layout (mmseg's pretrain file) into the ViT, the patch bias dropped when built without one."""
    import zoo
    from zoo.weights import load_pretrained
    source = zoo.create_backbone('vit_base_patch16_224', embed_dim=D, depth=2, num_heads=HEADS, img_size=32,
                                 out_indices=(0, 1))
    rules = {'prefix.cls': 'cls_token', 'pos_embed.weight': 'pos_embed'}
    mmseg_names = {}
    for key in source.state_dict():
        name = rules.get(key, key).replace('patch_embed.proj.', 'patch_embed.projection.').replace('blocks.', 'layers.')
        for ours, theirs in (('norm1', 'ln1'), ('norm2', 'ln2'), ('attn.qkv.', 'attn.attn.in_proj_'),
                             ('attn.proj.', 'attn.attn.out_proj.'), ('mlp.fc1', 'ffn.layers.0.0'),
                             ('mlp.fc2', 'ffn.layers.1')):
            name = name.replace(ours, theirs)
        mmseg_names[key] = name
    state = {mmseg_names[k]: v + 1 for k, v in source.state_dict().items()}
    state['ln1.weight'], state['ln1.bias'] = torch.ones(D), torch.zeros(D)  # final norm, a backbone has none
    for patch_bias in (True, False):
        target = zoo.create_backbone('vit_base_patch16_224', embed_dim=D, depth=2, num_heads=HEADS, img_size=32,
                                     out_indices=(0, 1), patch_bias=patch_bias)
        report = load_pretrained(target, state)
        assert report.format == 'mmseg'
        assert all(torch.equal(v, state[mmseg_names[k]]) for k, v in target.state_dict().items())
        assert ('patch_embed.proj.bias' in report.dropped) != patch_bias and 'norm.weight' in report.dropped


@pytest.mark.slow
def test_mmseg_recipe_trains_through_the_cli_and_says_its_effective_batch(tmp_path):
    """ADE20K samples (3 validation images, used as training data here) at the recipe's 512 crop, a 4-block
    width-32 ViT: effective batch 2 = 1 image x 2 accumulated iterations, 2 optimizer steps."""
    root = shared_data('ade20k-samples')
    import train as train_tool  # tools/ is on the path (pyproject.toml's pytest pythonpath)
    options = ['model.backbone.pretrained=None', f'model.backbone.embed_dim={D}', 'model.backbone.depth=4',
               f'model.backbone.num_heads={HEADS}', 'model.backbone.out_indices=[0,1,2,3]',
               'model.backbone.img_size=32', 'model.neck.hidden_channels=[8,8,16,16]',
               f'model.neck.fusion_channels={C}', f'model.decode_head.in_channels={C}',
               'train_dataloader.dataset.split=validation',
               'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
               'val_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False',
               'train_dataloader.batch_size=1', 'effective_batch_size=2', 'train_cfg.max_iters=2',
               'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=2', 'default_hooks.logger.interval=1']
    runner = train_tool.main([str(CONFIGS / 'dpt_vitb_ade20k.py'), '--data-root', str(root),
                              '--work-dir', str(tmp_path), '--cfg-options', *options])
    assert runner.iter == 4 and runner.optim_wrapper._accumulative_counts == 2
    assert runner.effective_batch_note.startswith('effective batch 2 = 1 process(es) x 1 images x 2 accumulated')
    log = next(tmp_path.rglob('*.log')).read_text()
    assert 'effective batch 2 = 1 process(es)' in log and 'mIoU' in log
