"""timm's option names for a ViT's parts, translated into an :class:`~.vit_spec.EncoderSpec`: the one place where
``create_backbone(name, qkv_bias=False)``, ``init_values=1e-5``, ``class_token=False``, ``reg_tokens=4`` (and the
other names :data:`OPTIONS` lists, which configs and the HF config readers pass) become changes of a family's spec.
"""
from __future__ import annotations

from ..option_types import OptionTypeError, describe, matches
from .vit_spec import EncoderSpec

#: option -> (the type of its value, what it sets)
OPTIONS = {
    'qkv_bias': (bool, 'block.attn.qkv: biases on q, k and v'),
    'key_bias': (bool, "block.attn.qkv: False for q and v biases only ('qv_bias')"),
    'rope': (dict | None, 'block.attn.rope'),
    'alibi': (dict | bool | None, 'block.attn.alibi'),
    'attn_norm': (bool, "block.attn.proj 'norm_linear' (timm's scale_attn_inner)"),
    'proj_bias': (bool, 'block.attn.proj and block.mlp.bias'),
    'swiglu': (bool, "block.mlp.kind 'swiglu'"),
    'act': (str, 'block.mlp.act'),
    'mlp_norm': (bool, "block.mlp.norm (timm's scale_mlp)"),
    'init_values': (float | None, 'block.layer_scale'),
    'norm_placement': (str | None, 'block.placement'),
    'post_norm': (bool, "block.placement 'post'"),
    'class_token': (bool, 'prefix.cls'),
    'dist_token': (bool, 'prefix.dist'),
    'reg_tokens': (int, 'prefix.registers'),
    'pos_embed': (str, 'positions.kind'),
    'pos_embed_prefix': (bool, "positions.prefix (timm's no_embed_class=False)"),
    'pos_interp': (str, 'positions.interp'),
    'pos_antialias': (bool, 'positions.antialias'),
    'pos_align_corners': (bool, 'positions.align_corners'),
    'patch_bias': (bool, 'patch.bias'),
    'patch_norm': (bool, "patch.norm (timm's embed_norm_layer)"),
    'drop_remainder': (bool, "patch.remainder 'drop'"),
    'norm': (str, 'norm'),
    'norm_eps': (float, 'norm_eps'),
    'pre_norm': (bool, 'pre_norm'),
}


def check_options(options: dict, owner: str = 'ViTEncoder') -> None:
    """TypeError for a name :data:`OPTIONS` does not list, :class:`OptionTypeError` for a value of the wrong type."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"{owner} does not accept {unknown}; its part options (timm's names): {sorted(OPTIONS)}, "
                        f"or spec=EncoderSpec(...) (zoo.backbones.vit_spec)")
    wrong = [f"option {k} expects {describe(OPTIONS[k][0])}, got {v!r} ({type(v).__name__})"
             for k, v in options.items() if matches(v, OPTIONS[k][0]) is False]
    if wrong:
        raise OptionTypeError(f"{owner}: {'; '.join(wrong)}")


def spec_from_timm_options(spec: EncoderSpec, **options) -> EncoderSpec:
    """``spec`` with the parts that ``options`` (timm's names, :data:`OPTIONS`) set changed; the others kept."""
    check_options(options)
    if not options:
        return spec
    o, block = options, spec.block
    attn, mlp = block.attn, block.mlp
    qkv_bias = o.get('qkv_bias', attn.qkv != 'fused_no_bias')
    key_bias = o.get('key_bias', attn.qkv != 'qv_bias')
    proj_bias = o.get('proj_bias', mlp.bias)
    attn_norm = o.get('attn_norm', attn.proj == 'norm_linear')
    placement = block.placement
    if 'post_norm' in o:
        placement = 'post' if o['post_norm'] else ('pre' if placement == 'post' else placement)
    placement = o.get('norm_placement') or placement
    mlp_kind = ('swiglu' if o['swiglu'] else 'mlp') if 'swiglu' in o else mlp.kind
    return spec.replace(
        patch=dict(bias=o.get('patch_bias', spec.patch.bias), norm=o.get('patch_norm', spec.patch.norm),
                   remainder=('drop' if o['drop_remainder'] else 'refuse') if 'drop_remainder' in o
                   else spec.patch.remainder),
        prefix=dict(cls=o.get('class_token', spec.prefix.cls), dist=o.get('dist_token', spec.prefix.dist),
                    registers=o.get('reg_tokens', spec.prefix.registers)),
        positions=dict(kind=o.get('pos_embed', spec.positions.kind),
                       prefix=o.get('pos_embed_prefix', spec.positions.prefix),
                       interp=o.get('pos_interp', spec.positions.interp),
                       antialias=o.get('pos_antialias', spec.positions.antialias),
                       align_corners=o.get('pos_align_corners', spec.positions.align_corners)),
        block=dict(attn=dict(qkv='fused_no_bias' if not qkv_bias else ('fused' if key_bias else 'qv_bias'),
                             rope=o.get('rope', attn.rope), alibi=o.get('alibi', attn.alibi),
                             proj='norm_linear' if attn_norm else ('linear' if proj_bias else 'no_bias')),
                   mlp=dict(kind=mlp_kind, act=o.get('act', mlp.act), norm=o.get('mlp_norm', mlp.norm),
                            bias=proj_bias),
                   placement=placement, layer_scale=o.get('init_values', block.layer_scale)),
        norm=o.get('norm', spec.norm), norm_eps=o.get('norm_eps', spec.norm_eps),
        pre_norm=o.get('pre_norm', spec.pre_norm))
