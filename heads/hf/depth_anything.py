"""transformers' ``DepthAnythingForDepthEstimation`` folders (a DINOv2 backbone) as this project's Depth Anything
:class:`heads.models.DepthEstimator` (:mod:`heads.models.depth_anything`), with identical outputs.

``config.json`` is untrusted input: every field used is checked (:class:`heads.hf.config.HFConfigError` names the
field), the backbone must be transformers' DINOv2 (``model_type`` 'dinov2'), and the model config built holds only
numbers, booleans, None and identifiers. The position table is resampled as transformers does (bicubic to the grid,
no antialias). The weights' layout is :mod:`heads.layouts.hf`'s (the ``'transformers depth_anything'`` row of
:data:`heads.layouts.table.LAYOUTS`).
"""
from __future__ import annotations

import re

from ..models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
from .config import HFConfigError, _Fields, check_literal
from .model_size import check_blocks, check_grid, check_model_size

# transformers' Dinov2Config defaults inside a DepthAnythingConfig without a backbone_config
_DEFAULT_BACKBONE = dict(model_type='dinov2', image_size=518, hidden_size=384, num_attention_heads=6,
                         out_indices=[9, 10, 11, 12])


def _taps(f: _Fields, layers: int) -> list[int]:
    """The tapped blocks (0-based) from ``out_indices`` (stage numbers, 0 = the embeddings) or ``out_features``."""
    names = f.config.get('out_features')
    if f.config.get('out_indices') is None and isinstance(names, list):  # 'stageN' names only
        if not all(isinstance(n, str) and re.fullmatch(r'stage\d+', n) for n in names):
            f.fail('out_features', "a list of 'stageN' names")
        f = _Fields({**f.config, 'out_indices': [int(n[5:]) for n in names]}, f.source, f.writer)
    stages = f.integers('out_indices', None, 1, layers)
    if stages != sorted(set(stages)):
        f.fail('out_indices', f"distinct increasing stage numbers from 1 to {layers}")
    return [s - 1 for s in stages]


def depth_anything_config_from_hf(config: dict, source='config.json') -> dict:
    """Our model config equivalent to a transformers ``DepthAnythingConfig`` dict (fields checked first)."""
    if config.get('model_type') != 'depth_anything':
        raise HFConfigError(f"{source}: not a Depth Anything config (model_type={config.get('model_type')!r})")
    f = _Fields(config, source, 'DepthAnythingConfig')
    inner = config.get('backbone_config') or dict(_DEFAULT_BACKBONE)
    if not isinstance(inner, dict) or inner.get('model_type') != 'dinov2' or config.get('backbone'):
        raise HFConfigError(f"{source}: only a DINOv2 backbone (backbone_config with model_type 'dinov2') is "
                            f"supported, got {inner.get('model_type') if isinstance(inner, dict) else inner!r}")
    b = _Fields({**{k: v for k, v in _DEFAULT_BACKBONE.items() if k != 'out_indices'}, **inner},
                f"{source} backbone_config", 'Dinov2Config')
    if b.get('hidden_act', 'gelu') != 'gelu':
        b.fail('hidden_act', "'gelu'")
    hidden, heads = b.integer('hidden_size'), b.integer('num_attention_heads')
    layers = b.integer('num_hidden_layers', 12)
    if hidden % heads:
        b.fail('num_attention_heads', f"a divisor of hidden_size {hidden}")
    mlp_hidden = int(hidden * b.number('mlp_ratio', 4, 0.25, 64))
    swiglu = b.flag('use_swiglu_ffn', False)
    if swiglu:  # transformers' SwiGLU width: 2/3 of the MLP's, rounded up to a multiple of 8
        mlp_hidden = (int(mlp_hidden * 2 / 3) + 7) // 8 * 8
    patch = b.integer('patch_size', 14)
    check_grid(b.source, b.integer('image_size'), patch)
    check_blocks(b.source, {'num_hidden_layers': layers})
    backbone = dict(type='ZooBackbone', name='vit_small_patch14_dinov2', img_size=b.integer('image_size'),
                    patch_size=patch, embed_dim=hidden, depth=layers, num_heads=heads,
                    mlp_ratio=(mlp_hidden + 0.5) / hidden,  # int(hidden * ratio) = mlp_hidden despite rounding
                    qkv_bias=b.flag('qkv_bias', True), norm_eps=b.number('layer_norm_eps', 1e-6, 0.0, 1.0),
                    swiglu=swiglu, tap_norm=b.flag('apply_layernorm', True), pos_interp='bicubic',
                    pos_antialias=False, out_indices=_taps(b, layers))
    taps = len(backbone['out_indices'])
    if f.integer('reassemble_hidden_size', 384) != hidden:
        f.fail('reassemble_hidden_size', f"the backbone's hidden_size {hidden}")
    if f.get('head_in_index', -1) != -1:
        f.fail('head_in_index', '-1 (the finest fused map)')
    if f.integer('patch_size', 14) != patch:
        f.fail('patch_size', f"the backbone's patch_size {patch}")
    fusion = f.integer('fusion_hidden_size', 64)
    mode = f.choice('depth_estimation_type', 'relative', ('relative', 'metric'))
    max_depth = f.number('max_depth', 1, 1e-6, 1e6)
    widths = f.integers('neck_hidden_sizes', taps, 1, 1 << 16)
    neck = dict(type='DepthAnythingNeck', readout='ignore', hidden_channels=widths,
                reassemble_factors=f.numbers('reassemble_factors', [4, 2, 1, 0.5], taps), fusion_channels=fusion)
    head = dict(type='DepthAnythingHead', in_channels=fusion, hidden_channels=f.integer('head_hidden_size', 32),
                mode=mode, max_depth=max_depth, upsample=patch / 8)
    model = dict(
        type='DepthEstimator', backbone=backbone, neck=neck, decode_head=head,
        max_depth=max_depth if mode == 'metric' else 10.0,
        data_preprocessor=dict(type='DensePreprocessor', mean=IMAGENET_MEAN_255, std=IMAGENET_STD_255,
                               size_divisor=patch))
    check_literal(model)
    check_model_size(model, source, {'backbone_config.hidden_size': hidden, 'backbone_config.num_hidden_layers': layers,
                                     'backbone_config.mlp_ratio': mlp_hidden / hidden, 'neck_hidden_sizes': widths,
                                     'fusion_hidden_size': fusion, 'head_hidden_size': head['hidden_channels']})
    return model
