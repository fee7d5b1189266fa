"""transformers' ``EomtForUniversalSegmentation`` folders as this project's :class:`heads.models.eomt.EoMT`, with
identical class and mask logits.

transformers' EoMT is a DINOv2-like ViT (CLS and register tokens, a learned table on the patch tokens only, LayerScale,
GELU or SwiGLU MLPs, q/k/v as three Linears), so it becomes our DINOv2 backbone (``vit_small_patch14_dinov2`` with
the config's sizes); its q/k/v Linears are fused into one, the SwiGLU ``gate_proj``/``up_proj`` packed into one fc1
([gate | value], :class:`zoo.core.Mlp` ``gated``), and the head's parts renamed. ``attn_mask_probs`` (the blocks'
probabilities of masked attention) is loaded as saved; the loss's ``criterion.empty_weight`` is dropped (the loss
is built from the config's weights, points and sampling ratios: the same loss, :mod:`heads.losses.mask_classification`).

transformers' model runs only at its configured square ``image_size`` (its position table is not resampled); ours
resamples the table (bicubic, no antialias, as transformers' DINOv2) to any grid the patches tile.

``config.json`` is untrusted input: every field used is checked (:class:`heads.hf.config.HFConfigError` names the
field) and the model config built holds only numbers, booleans, None and identifiers.
"""
from __future__ import annotations

import re

from zoo.weights.layout_error import fused_qkv, gather_qkv
from zoo.weights.rename import rename_keys, rules

from ..models.depth_anything import IMAGENET_MEAN_255, IMAGENET_STD_255
from .config import HFConfigError, _Fields, check_literal
from .model_size import check_blocks, check_grid, check_model_size

_RULES = rules(r"""
    ^embeddings\.cls_token$                                  -> backbone.prefix.cls
    ^embeddings\.register_tokens$                            -> backbone.prefix.registers
    ^embeddings\.position_embeddings\.weight$                -> backbone.pos_embed.weight
    ^embeddings\.patch_embeddings\.projection\.              -> backbone.patch_embed.proj.
    ^layers\.(\d+)\.norm(\d)\.                               -> backbone.blocks.\1.norm\2.
    ^layers\.(\d+)\.attention\.out_proj\.                    -> backbone.blocks.\1.attn.proj.
    ^layers\.(\d+)\.layer_scale(\d)\.lambda1$                -> backbone.blocks.\1.ls\2.gamma
    ^layers\.(\d+)\.mlp\.(fc\d)\.                            -> backbone.blocks.\1.mlp.\2.
    ^layers\.(\d+)\.mlp\.down_proj\.                         -> backbone.blocks.\1.mlp.fc2.
    ^layernorm\.                                             -> norm.
    ^upscale_block\.block\.(\d+)\.layernorm2d\.              -> upscale.\1.norm.
    ^upscale_block\.block\.(\d+)\.                           -> upscale.\1.
    ^mask_head\.                                             -> mask_mlp.
    ^class_predictor\.                                       -> class_head.
""")
_QKV = re.compile(r'^layers\.(?P<layer>\d+)\.attention\.(?P<part>[qkv]_proj)\.(?P<kind>weight|bias)$')
_GLU = re.compile(r'^layers\.(?P<layer>\d+)\.mlp\.(?P<part>gate_proj|up_proj)\.(?P<kind>weight|bias)$')
_UNUSED = re.compile(r'^criterion\.')


def convert_hf_eomt_state(state: dict) -> dict:
    """transformers' EoMT keys to ours (module docstring)."""
    rest, qkv = gather_qkv({k: v for k, v in state.items() if not _UNUSED.match(k)}, _QKV)
    rest, glu = gather_qkv(rest, _GLU)
    out = rename_keys(rest, _RULES)
    registers = out.get('backbone.prefix.registers')
    if registers is not None and registers.shape[1] == 0:  # transformers keeps an empty parameter for none
        del out['backbone.prefix.registers']
    table = out.get('backbone.pos_embed.weight')
    if table is not None and table.ndim == 2:  # an nn.Embedding '(h w) d' -> '1 (h w) d'
        out['backbone.pos_embed.weight'] = table[None]
    for (block, kind), parts in qkv.items():
        out[f'backbone.blocks.{block}.attn.qkv.{kind}'] = fused_qkv(
            parts, f'layers.{block}.attention', kind, 'EoMT model', ('q_proj', 'k_proj', 'v_proj'))
    for (block, kind), parts in glu.items():  # SwiGLU: fc1 packs [gate | value]
        out[f'backbone.blocks.{block}.mlp.fc1.{kind}'] = fused_qkv(
            parts, f'layers.{block}.mlp', kind, 'EoMT model',
            ('gate_proj', 'up_proj'))
    return out


def eomt_config_from_hf(config: dict, source='config.json') -> dict:
    """Our model config equivalent to a transformers ``EomtConfig`` dict (fields checked first)."""
    if config.get('model_type') != 'eomt':
        raise HFConfigError(f"{source}: not an EoMT config (model_type={config.get('model_type')!r})")
    f = _Fields(config, source)
    if f.get('hidden_act', 'gelu') != 'gelu':
        f.fail('hidden_act', "'gelu'")
    hidden, heads = f.integer('hidden_size', 1024), f.integer('num_attention_heads', 16)
    layers, patch, size = f.integer('num_hidden_layers', 24), f.integer('patch_size', 16), f.integer('image_size', 640)
    if hidden % heads:
        f.fail('num_attention_heads', f"a divisor of hidden_size {hidden}")
    mlp_hidden = int(hidden * f.number('mlp_ratio', 4, 0.25, 64))
    swiglu = f.flag('use_swiglu_ffn', False)
    if swiglu:  # transformers' SwiGLU width: 2/3 of the MLP's, rounded up to a multiple of 8
        mlp_hidden = (int(mlp_hidden * 2 / 3) + 7) // 8 * 8
    labels = config.get('id2label')
    if not isinstance(labels, dict) or not labels:
        f.fail('id2label', 'an object naming the classes (transformers writes it from num_labels)')
    check_grid(source, size, patch)
    check_blocks(source, {'num_hidden_layers': layers})
    num_blocks = f.integer('num_blocks', 4)
    if num_blocks > layers:
        f.fail('num_blocks', f"at most num_hidden_layers ({layers})")
    backbone = dict(type='ZooBackbone', name='vit_small_patch14_dinov2', img_size=size, patch_size=patch,
                    in_chans=f.integer('num_channels', 3), embed_dim=hidden, depth=layers, num_heads=heads,
                    mlp_ratio=(mlp_hidden + 0.5) / hidden,  # int(hidden * ratio) = mlp_hidden despite rounding
                    swiglu=swiglu, qkv_bias=True, norm_eps=f.number('layer_norm_eps', 1e-6, 0.0, 1.0),
                    init_values=f.number('layerscale_value', 1.0, -1e6, 1e6) or 1.0,  # any: the file's values load
                    reg_tokens=f.integer('num_register_tokens', 4, minimum=0), pos_embed_prefix=False,
                    pos_interp='bicubic', pos_antialias=False)
    model = dict(type='EoMT', backbone=backbone, num_classes=len(labels), num_queries=f.integer('num_queries', 200),
                 num_blocks=num_blocks, num_upscale=f.integer('num_upscale_blocks', 2),
                 loss=dict(class_weight=f.number('class_weight', 2.0, 0.0, 1e6),
                           mask_weight=f.number('mask_weight', 5.0, 0.0, 1e6),
                           dice_weight=f.number('dice_weight', 5.0, 0.0, 1e6),
                           no_object_weight=f.number('no_object_weight', 0.1, 0.0, 1e6),
                           num_points=f.integer('train_num_points', 12544),
                           oversample_ratio=f.number('oversample_ratio', 3.0, 1.0, 1e3),
                           importance_sample_ratio=f.number('importance_sample_ratio', 0.75, 0.0, 1.0)),
                 data_preprocessor=dict(type='DensePreprocessor', mean=IMAGENET_MEAN_255, std=IMAGENET_STD_255,
                                        size_divisor=patch))
    check_literal(model)
    check_model_size(model, source, {'hidden_size': hidden, 'num_hidden_layers': layers,
                                     'mlp_ratio': mlp_hidden / hidden, 'image_size': size,
                                     'num_queries': model['num_queries']})
    return model
