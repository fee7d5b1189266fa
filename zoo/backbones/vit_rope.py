"""ViTs with 2-D rotary positions (:mod:`zoo.core.rope`), under timm's names: the plain :mod:`.vit` family with the
``rope`` option (and LayerScale), so nothing here but the registered variants.

- RoPE-ViT (Heo et al. 2024, naver-ai/rope-vit; timm ``vit_*_patch16_rope[_mixed][_ape]_224``): CLS token, axial
  RoPE (temperature 100) or mixed RoPE (learned frequencies, temperature 10), x first; ``_ape`` adds a learned
  absolute table over the patches only;
- timm's "SBB" ViTs (``vit_*_patch16_rope_reg*_gap_256``): register tokens, no CLS, mean pooling, axial RoPE of
  temperature 10 000, row first, positions rescaled to the 16x16 grid of their 256 pre-training size; EVA's
  attention, with q and v biases but none on k.

timm builds them in its EVA model; :mod:`zoo.weights.eva` converts those checkpoints.
"""
from __future__ import annotations

from ..registry import (
    HALF_MEAN,
    HALF_STD,
    IMAGENET_MEAN,
    IMAGENET_STD,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    register_variant,
)
from .vit import VIT, VIT_SIZES
from .vit_spec import AttentionSpec, BlockSpec, EncoderSpec, PositionSpec, PrefixSpec

_AXIAL = dict(kind='axial', temperature=100.0, indexing='xy')
_MIXED = dict(kind='mixed', temperature=10.0, indexing='xy')
for _size in ('small', 'base'):
    for _suffix, _rope, _ape in (('rope', _AXIAL, False), ('rope_mixed', _MIXED, False),
                                 ('rope_ape', _AXIAL, True), ('rope_mixed_ape', _MIXED, True)):
        register_variant(f'vit_{_size}_patch16_{_suffix}_224', VIT, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                         input_size=224, patch_size=16, **VIT_SIZES[_size],
                         spec=EncoderSpec(positions=PositionSpec(kind='learned' if _ape else 'none', prefix=False),
                                          block=BlockSpec(attn=AttentionSpec(rope=_rope), layer_scale=1e-5)))

_SBB_SIZES = {'medium': dict(embed_dim=512, depth=12, num_heads=8),
              'mediumd': dict(embed_dim=512, depth=20, num_heads=8),  # no q/k/v biases
              'betwixt': dict(embed_dim=640, depth=12, num_heads=10),
              'base': VIT_SIZES['base']}
_SBB_ROPE = dict(kind='axial', temperature=10000.0, indexing='ij', ref_grid=(16, 16))
#: registers and no class token, no absolute positions, RoPE, q and v biases, LayerScale 1e-5
SBB_SPEC = EncoderSpec(prefix=PrefixSpec(cls=False), positions=PositionSpec(kind='none'),
                       block=BlockSpec(attn=AttentionSpec(qkv='qv_bias', rope=_SBB_ROPE), layer_scale=1e-5))
for _size, _registers in (('medium', 1), ('mediumd', 1), ('betwixt', 4), ('base', 1)):
    _mean, _std = (OPENAI_CLIP_MEAN, OPENAI_CLIP_STD) if _size == 'betwixt' else (HALF_MEAN, HALF_STD)
    register_variant(f'vit_{_size}_patch16_rope_reg{_registers}_gap_256', VIT, mean=_mean, std=_std, input_size=256,
                     patch_size=16, head=dict(global_pool='avg'), **_SBB_SIZES[_size],
                     spec=SBB_SPEC.replace(prefix=dict(registers=_registers),
                                           block=dict(attn=dict(qkv='fused_no_bias' if _size == 'mediumd'
                                                                else 'qv_bias'))))
