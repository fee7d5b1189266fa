"""Perception Encoder (Bolya et al. 2025, "Perception Encoder: The best visual embeddings are not at the output of the
network") image towers under timm's ``vit_pe_{core,lang,spatial}_*`` names: the plain :mod:`.vit` family with options,
so nothing here but the registered variants.

- a LayerNorm before the blocks (``pre_norm``) and no patch-embedding bias, LayerNorm eps 1e-5;
- a CLS token (not in the gigantic towers) and a learned absolute table over it and the patches, plus axial RoPE
  (temperature 10 000, x first) on the patch tokens only, at positions 1 .. w / 1 .. h (``offset=1``; 0 for the
  gigantic towers) rescaled to the grid of the pre-training size (``ref_grid``, timm's ``ref_feat_shape``);
- the fused q/k/v projection with biases, GELU MLPs;
- ``core``: the CLIP tower: final norm, then SigLIP's MAP head with 8 heads and MLP ratio 4 (``pool_heads``,
  ``pool_mlp_ratio``; :class:`zoo.core.ProbePool`), which reads the CLS token too (``pool_prefix``), and the CLIP
  projection as the head (timm's defaults: the embedding width); no LayerScale;
- ``lang`` and ``spatial``: the intermediate-layer towers (the language-aligned one cut after 23 / 47 blocks): no final
  norm (``final_norm=False``), the pooled feature is the mean of the last block's patch tokens, headless
  (``num_classes=0``); LayerScale 0.1 in ``lang`` and the gigantic ``spatial``.

Mean = std = 0.5. timm converts Meta's files to its EVA layout; :mod:`zoo.weights.eva` reads that one. transformers
5.24 has no Perception Encoder image model of its own (its PE video / PerceptionLM models wrap timm's towers).
"""
from __future__ import annotations

from ..registry import HALF_MEAN, HALF_STD, register_variant
from .vit import VIT
from .vit_spec import AttentionSpec, BlockSpec, EncoderSpec, PatchSpec, PrefixSpec

#: a LayerNorm before the blocks (eps 1e-5), no patch-embedding bias; RoPE and LayerScale per tower (:func:`pe_spec`)
PE_SPEC = EncoderSpec(patch=PatchSpec(bias=False), pre_norm=True, norm_eps=1e-5)
_HALF = dict(mean=HALF_MEAN, std=HALF_STD)
_GIGANTIC = dict(embed_dim=1536, num_heads=16, mlp_ratio=8960 / 1536)
PE_SIZES = {'tiny': dict(embed_dim=192, depth=12, num_heads=3), 'small': dict(embed_dim=384, depth=12, num_heads=6),
            'base': dict(embed_dim=768, depth=12, num_heads=12), 'large': dict(embed_dim=1024, depth=24, num_heads=16),
            'gigantic': dict(depth=50, **_GIGANTIC)}


def pe_rope(ref: int, gigantic: bool = False) -> dict:
    """Axial RoPE, x first, positions from 1 (0 for the gigantic towers) rescaled to a ref x ref grid."""
    return dict(kind='axial', temperature=10000.0, indexing='xy', ref_grid=(ref, ref), offset=0.0 if gigantic else 1.0)


def pe_spec(ref: int, gigantic: bool = False, layer_scale: float | None = None) -> EncoderSpec:
    """A tower's spec: :func:`pe_rope` of ``ref``, no class token in the gigantic towers, LayerScale ``layer_scale``."""
    return PE_SPEC.replace(prefix=PrefixSpec(cls=not gigantic),
                           block=BlockSpec(attn=AttentionSpec(rope=pe_rope(ref, gigantic)), layer_scale=layer_scale))


_MAP = dict(global_pool='map', pool_heads=8, pool_mlp_ratio=4.0, pool_prefix=True)  # over the CLS token too
# core: (size, patch, resolution, RoPE reference grid, embedding width = the head's classes)
for _size, _patch, _res, _ref, _classes in (('tiny', 16, 384, 24, 512), ('small', 16, 384, 24, 512),
                                             ('base', 16, 224, 14, 1024), ('large', 14, 336, 24, 1024),
                                             ('gigantic', 14, 448, 32, 1280)):
    register_variant(f'vit_pe_core_{_size}_patch{_patch}_{_res}', VIT, input_size=_res, num_classes=_classes,
                     patch_size=_patch, spec=pe_spec(_ref, _size == 'gigantic'), head=_MAP, **_HALF,
                     **PE_SIZES[_size])
_FEATURES = dict(global_pool='avg', final_norm=False)  # the mean of the last block's patch tokens, no norm
# lang: the language-aligned towers, blocks cut at 23 / 47, LayerScale 0.1
for _size, _sizes in (('large', dict(PE_SIZES['large'], depth=23)), ('gigantic', dict(_GIGANTIC, depth=47))):
    register_variant(f'vit_pe_lang_{_size}_patch14_448', VIT, input_size=448, num_classes=0, patch_size=14,
                     spec=pe_spec(32, _size == 'gigantic', 0.1), head=_FEATURES, **_HALF, **_sizes)
# spatial: the dense-feature towers; LayerScale 0.1 in the gigantic one only
for _size, _patch, _res in (('tiny', 16, 512), ('small', 16, 512), ('base', 16, 512), ('large', 14, 448),
                            ('gigantic', 14, 448)):
    register_variant(f'vit_pe_spatial_{_size}_patch{_patch}_{_res}', VIT, input_size=_res, num_classes=0,
                     patch_size=_patch, spec=pe_spec(32, _size == 'gigantic', 0.1 if _size == 'gigantic' else None),
                     head=_FEATURES, **_HALF, **PE_SIZES[_size])
