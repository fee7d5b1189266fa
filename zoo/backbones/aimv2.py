"""AIMv2 (Fini et al. 2024, "Multimodal Autoregressive Pre-training of Large Vision Encoders") image encoders under
timm's ``aimv2_*`` names: the plain :mod:`.vit` family with options, so nothing here but the registered variants.

- RMSNorm everywhere (``norm='rms'``, eps 1e-5), also on the patch tokens before the positions (``patch_norm``);
- no CLS token: a learned absolute table over the patches only, resampled to each grid;
- no biases in the q/k/v projection, the attention's output projection or the MLPs (``qkv_bias=False``,
  ``proj_bias=False``; the patch-embedding conv keeps its bias);
- SwiGLU MLPs (:class:`zoo.core.Mlp` ``gated``: [gate | value] packed in ``fc1``), hidden width
  ``int(d * mlp_ratio)``: 2.75 in large (2816) and 1B (5632), 2.6667 in huge (4096) and 3B (8192);
- the final norm on the tokens, then the mean of the patch tokens (``global_pool='avg'``, ``fc_norm=False``);
  no LayerScale. timm's weights are headless (``num_classes=0``: pooled features).

CLIP's mean / std. Sizes: large 1024 x 24 (8 heads), huge 1536 x 24 (12), 1B 2048 x 24 (16), 3B 3072 x 24 (24),
each at 224, 336 and 448 px with 14 px patches. Weights: timm's files (:mod:`zoo.weights.timm`, whose EVA rules
pack the SwiGLU's ``fc1_g`` / ``fc1_x``) and transformers' ``Aimv2VisionModel`` (:mod:`zoo.weights.aimv2`).
"""
from __future__ import annotations

from ..registry import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, register_variant
from .vit import VIT
from .vit_spec import AttentionSpec, BlockSpec, EncoderSpec, MlpSpec, PatchSpec, PrefixSpec

#: RMSNorm everywhere and on the patch tokens, no class token, no biases in the blocks, SwiGLU MLPs
AIMV2_SPEC = EncoderSpec(patch=PatchSpec(norm=True), prefix=PrefixSpec(cls=False), norm='rms', norm_eps=1e-5,
                         block=BlockSpec(attn=AttentionSpec(qkv='fused_no_bias', proj='no_bias'),
                                         mlp=MlpSpec(kind='swiglu', bias=False)))
_PRETRAINED = dict(patch_size=14, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD, num_classes=0,
                   head=dict(global_pool='avg', fc_norm=False))
AIMV2_SIZES = {
    'large': dict(embed_dim=1024, depth=24, num_heads=8, mlp_ratio=2.75),
    'huge': dict(embed_dim=1536, depth=24, num_heads=12, mlp_ratio=2.6667),
    '1b': dict(embed_dim=2048, depth=24, num_heads=16, mlp_ratio=2.75),
    '3b': dict(embed_dim=3072, depth=24, num_heads=24, mlp_ratio=2.6667),
}
for _size, _dims in AIMV2_SIZES.items():
    for _res in (224, 336, 448):
        register_variant(f'aimv2_{_size}_patch14_{_res}', VIT, input_size=_res, spec=AIMV2_SPEC, **_PRETRAINED, **_dims)
