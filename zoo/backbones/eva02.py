"""EVA-02 (Fang et al. 2023, "EVA-02: A Visual Representation for Neon Genesis") and the EVA-02 CLIP image towers
(Sun et al. 2023, "EVA-CLIP"), under timm's ``eva02_*`` names: the plain :mod:`.vit` family with options, so nothing
here but the registered variants.

- a CLS token and a learned absolute table over it and the patches (resampled to each grid), plus axial RoPE
  (temperature 10 000, row first) on the patch tokens only, positions rescaled to the 16x16 grid of 224 px / 14
  (``ref_grid``: EVA's rule, also at 336 / 448 px and for the 16 px patches of the base CLIP tower);
- EVA's attention: learned q and v biases, none on k (:class:`zoo.core.QVBiasQKV`; timm's base and large keep q, k,
  v as three Linears, which :mod:`zoo.weights.eva` fuses);
- SwiGLU MLPs of hidden width 8/3 d (:class:`zoo.core.Mlp` ``gated``); base and large add a LayerNorm on that
  hidden width before fc2 (``mlp_norm``: the Mlp's ``norm`` part; timm's ``scale_mlp``);
- the CLIP towers (``eva02_*_clip_*``) also norm the heads' output before the attention's projection
  (``attn_norm``: a :class:`zoo.core.PreNormLinear` ``proj`` part; timm's ``scale_attn_inner``) and pool the CLS
  token after the final norm; the classifiers average the patch tokens and norm after pooling (``fc_norm``);
- ``eva02_enormous_patch14_clip_224``: no RoPE, GELU MLPs, and blocks that norm each branch's output before the
  residual sum (``norm_placement='res_post'``, as Swin V2).

LayerNorm eps 1e-6; no LayerScale. timm's default weights are the MIM-pretrained encoders for the ``_224`` names
(``num_classes=0``: pooled features), ImageNet-1k classifiers for the 336 / 448 px ones and the CLIP projection (as a
``head`` of the embedding width) for the towers. :mod:`zoo.weights.eva` reads timm's files.
"""
from __future__ import annotations

from ..registry import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, register_variant
from .vit import VIT
from .vit_spec import AttentionSpec, BlockSpec, EncoderSpec, MlpSpec

EVA02_ROPE = dict(kind='axial', temperature=10000.0, indexing='ij', ref_grid=(16, 16))
#: q and v biases, axial RoPE, SwiGLU MLPs (of width 8/3 d: ``mlp_ratio`` in :data:`EVA02_SIZES`)
EVA02_SPEC = EncoderSpec(block=BlockSpec(attn=AttentionSpec(qkv='qv_bias', rope=EVA02_ROPE),
                                         mlp=MlpSpec(kind='swiglu')))
EVA02_SIZES = {
    'tiny': dict(embed_dim=192, depth=12, num_heads=3, mlp_ratio=4 * 2 / 3),
    'small': dict(embed_dim=384, depth=12, num_heads=6, mlp_ratio=4 * 2 / 3),
    'base': dict(embed_dim=768, depth=12, num_heads=12, mlp_ratio=4 * 2 / 3),
    'large': dict(embed_dim=1024, depth=24, num_heads=16, mlp_ratio=4 * 2 / 3),
}
_MLP_NORM = ('base', 'large')  # a LayerNorm on the MLP's hidden width


def eva02_spec(size: str, clip: bool = False) -> EncoderSpec:
    """The size's spec: the MLP norm in base and large; the CLIP towers' norm before the attention's projection."""
    return EVA02_SPEC.replace(block=dict(mlp=dict(norm=size in _MLP_NORM),
                                         attn=dict(proj='norm_linear' if clip else 'linear')))



_CLIP = dict(mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD)
# size -> (resolution, class count of timm's default weights) of its classifier names
_EVA02_VITS = {'tiny': ((224, 0), (336, 1000)), 'small': ((224, 0), (336, 1000)), 'base': ((224, 0), (448, 1000)),
               'large': ((224, 0), (448, 1000))}
for _size, _names in _EVA02_VITS.items():
    for _res, _classes in _names:
        register_variant(f'eva02_{_size}_patch14_{_res}', VIT, input_size=_res, num_classes=_classes, patch_size=14,
                         head=dict(global_pool='avg'), **_CLIP, spec=eva02_spec(_size), **EVA02_SIZES[_size])
# CLIP image towers: (size, patch, resolution, embedding width = the head's classes)
for _size, _patch, _res, _classes in (('base', 16, 224, 512), ('large', 14, 224, 768), ('large', 14, 336, 768)):
    register_variant(f'eva02_{_size}_patch{_patch}_clip_{_res}', VIT, input_size=_res, num_classes=_classes,
                     patch_size=_patch, head=dict(global_pool='token'), **_CLIP, spec=eva02_spec(_size, clip=True),
                     **EVA02_SIZES[_size])
register_variant('eva02_enormous_patch14_clip_224', VIT, input_size=224, num_classes=1024, patch_size=14,
                 embed_dim=1792, depth=64, num_heads=16, mlp_ratio=15360 / 1792, head=dict(global_pool='token'),
                 spec=EncoderSpec(block=BlockSpec(attn=AttentionSpec(qkv='qv_bias'), placement='res_post')), **_CLIP)
