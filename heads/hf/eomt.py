"""transformers' ``EomtForUniversalSegmentation`` folders as this project's :class:`heads.models.eomt.EoMT`, with
identical class and mask logits.

transformers' EoMT is a DINOv2-like ViT (CLS and register tokens, a learned table on the patch tokens only, LayerScale,
GELU or SwiGLU MLPs, q/k/v as three Linears), so it becomes our DINOv2 backbone (``vit_small_patch14_dinov2`` with
the config's sizes); the weights' layout (q/k/v fused, SwiGLU packed, the head renamed; ``attn_mask_probs`` loaded as
saved) is :mod:`heads.layouts.hf_eomt`'s. The loss's ``criterion.empty_weight`` is not loaded: the loss is built from
the config's weights, points and sampling ratios (the same loss, :mod:`heads.losses.mask_classification`).

``EomtDinov3ForUniversalSegmentation`` (``model_type`` 'eomt_dinov3'): the same head on transformers' DINOv3 ViT
(DINOv3's rotary positions, no position table; q and v biases, none on k), which becomes our DINOv3 backbone
(``vit_small_patch16_dinov3`` with the config's sizes).

transformers' EoMT runs only at its configured square ``image_size`` (its position table is not resampled); ours
resamples the table (bicubic, no antialias, as transformers' DINOv2) to any grid the patches tile.

``config.json`` is untrusted input: every field used is checked (:class:`heads.hf.config.HFConfigError` names the
field) and the model config built holds only numbers, booleans, None and identifiers.
"""
from __future__ import annotations

from ..models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
from .config import HFConfigError, _Fields, check_literal, mask_loss_fields
from .model_size import check_blocks, check_grid, check_model_size


def _head_config(f: _Fields, labels: dict, layers: int) -> dict:
    """The EoMT model config's own fields (queries, blocks, upscaling, loss) from an EoMT config."""
    num_blocks = f.integer('num_blocks', 4)
    if num_blocks > layers:
        f.fail('num_blocks', f"at most num_hidden_layers ({layers})")
    return dict(type='EoMT', num_classes=len(labels), num_queries=f.integer('num_queries', 200), num_blocks=num_blocks,
                num_upscale=f.integer('num_upscale_blocks', 2),
                loss=mask_loss_fields(f))


def eomt_config_from_hf(config: dict, source='config.json') -> dict:
    """Our model config equivalent to a transformers ``EomtConfig`` dict (fields checked first)."""
    model_type = config.get('model_type')
    if model_type not in ('eomt', 'eomt_dinov3'):
        raise HFConfigError(f"{source}: not an EoMT config (model_type={model_type!r}; 'eomt' or 'eomt_dinov3')")
    f = _Fields(config, source)
    act = f.choice('hidden_act', 'gelu', ('gelu', 'silu'))  # transformers' 'gelu' is the exact GELU, as ours
    hidden, heads = f.integer('hidden_size', 1024), f.integer('num_attention_heads', 16)
    layers, patch, size = f.integer('num_hidden_layers', 24), f.integer('patch_size', 16), f.integer('image_size', 640)
    if hidden % heads:
        f.fail('num_attention_heads', f"a divisor of hidden_size {hidden}")
    labels = config.get('id2label')
    if not isinstance(labels, dict) or not labels:
        f.fail('id2label', 'an object naming the classes (transformers writes it from num_labels)')
    check_grid(source, size, patch)
    check_blocks(source, {'num_hidden_layers': layers})
    common = dict(type='ZooBackbone', img_size=size, patch_size=patch, in_chans=f.integer('num_channels', 3),
                  embed_dim=hidden, depth=layers, num_heads=heads, norm_eps=f.number('layer_norm_eps', 1e-6, 0.0, 1.0),
                  init_values=f.number('layerscale_value', 1.0, -1e6, 1e6) or 1.0,  # any: the file's values load
                  reg_tokens=f.integer('num_register_tokens', 4, minimum=0), act=act)
    if model_type == 'eomt':
        mlp_hidden = int(hidden * f.number('mlp_ratio', 4, 0.25, 64))
        swiglu = f.flag('use_swiglu_ffn', False)
        if swiglu:  # transformers' SwiGLU width: 2/3 of the MLP's, rounded up to a multiple of 8
            mlp_hidden = (int(mlp_hidden * 2 / 3) + 7) // 8 * 8
        backbone = dict(common, name='vit_small_patch14_dinov2', swiglu=swiglu, qkv_bias=True, pos_embed_prefix=False,
                        pos_interp='bicubic', pos_antialias=False)
    else:
        if hidden // heads % 4:  # DINOv3's rotary positions split a head's width over 2 axes, sines and cosines
            f.fail('num_attention_heads', f"a divisor of hidden_size {hidden} leaving a head width divisible by 4 "
                                          f"(DINOv3's 2-D rotary positions)")
        mlp_hidden, swiglu = f.integer('intermediate_size', 4096), f.flag('use_gated_mlp', False)
        if swiglu and act != 'silu':  # its gated MLP gates with hidden_act: SwiGLU with 'silu'
            f.fail('hidden_act', "'silu' with use_gated_mlp (a SwiGLU MLP)")
        backbone = dict(common, name='vit_small_patch16_dinov3', swiglu=swiglu, **_dinov3_options(f))
    backbone['mlp_ratio'] = (mlp_hidden + 0.5) / hidden  # int(hidden * ratio) = mlp_hidden despite rounding
    model = dict(_head_config(f, labels, layers), backbone=backbone, act=act,
                 data_preprocessor=dict(type='DensePreprocessor', mean=IMAGENET_MEAN_255, std=IMAGENET_STD_255,
                                        size_divisor=patch))
    check_literal(model)
    check_model_size(model, source, {'hidden_size': hidden, 'num_hidden_layers': layers,
                                     'mlp_ratio': mlp_hidden / hidden, 'image_size': size,
                                     'num_queries': model['num_queries']})
    return model


def _dinov3_options(f: _Fields) -> dict:
    """The DINOv3 backbone's attention biases and rotary positions from an EoMT-DINOv3 config."""
    q, k, v = (f.flag(f'{name}_bias', default) for name, default in (('query', True), ('key', False), ('value', True)))
    if k or q != v:
        f.fail('key_bias' if k else 'value_bias', "false for key_bias and the same for query_bias and value_bias "
               "(DINOv3's attention: q and v biases or none)")
    proj = f.flag('proj_bias', True)
    if f.flag('mlp_bias', True) != proj:
        f.fail('mlp_bias', f"the same as proj_bias ({proj})")
    for name in ('pos_embed_shift', 'pos_embed_jitter'):
        if f.get(name, None) is not None:
            f.fail(name, 'null (training-time shift and jitter of the rotary positions are not supported)')
    rope = f.config.get('rope_parameters') or {}
    if not isinstance(rope, dict) or rope.get('rope_type', 'default') != 'default':
        f.fail('rope_parameters', "an object with rope_type 'default'")
    theta = _Fields(rope, f"{f.source} rope_parameters").number('rope_theta', 100.0, 1e-6, 1e9)
    rescale = f.get('pos_embed_rescale', None)
    rescale = None if rescale is None else f.number('pos_embed_rescale', 2.0, 1.0, 1e3)
    return dict(qkv_bias=q, key_bias=False, proj_bias=proj, pos_embed='none',
                rope=dict(kind='dinov3', base=theta, normalize='separate', rescale=rescale))
