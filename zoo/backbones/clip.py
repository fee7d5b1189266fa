"""CLIP image towers (Radford et al. 2021; OpenCLIP, DFN, MetaCLIP, TinyCLIP) under timm's ``vit_*_clip_*`` names:
the plain :mod:`.vit` family with a LayerNorm before the blocks (``pre_norm``), LayerNorm eps 1e-5, no patch-embedding
bias and a class token, so nothing here but the registered variants.

The ``_quickgelu_`` names run their MLPs with QuickGELU (``act='quick_gelu'``), as OpenAI's and DFN's towers were
trained. The classifier's final norm and head are CLIP's ``ln_post`` and image projection (``num_classes`` = the
embedding width; its bias zero) where timm's default weights are a CLIP tower, or an ImageNet head where they are
fine-tuned (``*_clip_224.laion2b_ft_in12k_in1k``). :mod:`zoo.weights` reads timm's files and transformers'
``CLIPVisionModel`` / ``CLIPVisionModelWithProjection`` / ``CLIPModel`` (:mod:`zoo.weights.clip`).
"""
from __future__ import annotations

from ..registry import HALF_MEAN, HALF_STD, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, register_variant
from .vit import VIT, VIT_SIZES
from .vit_spec import BlockSpec, EncoderSpec, MlpSpec, PatchSpec

#: a LayerNorm before the blocks (eps 1e-5), no patch-embedding bias, a class token
CLIP_SPEC = EncoderSpec(patch=PatchSpec(bias=False), pre_norm=True, norm_eps=1e-5)
CLIP_QUICKGELU_SPEC = CLIP_SPEC.replace(block=BlockSpec(mlp=MlpSpec(act='quick_gelu')))
CLIP_SIZES = {
    'xsmall': dict(embed_dim=256, depth=10, num_heads=4),
    'medium': dict(embed_dim=512, depth=12, num_heads=8),
    'betwixt': dict(embed_dim=640, depth=12, num_heads=10),
    'base': VIT_SIZES['base'],
    'base_plus': dict(embed_dim=896, depth=12, num_heads=14),
    'large': VIT_SIZES['large'],
    'huge': dict(embed_dim=1280, depth=32, num_heads=16),
    'giant': dict(embed_dim=1408, depth=40, num_heads=16, mlp_ratio=48 / 11),
    'gigantic': dict(embed_dim=1664, depth=48, num_heads=16, mlp_ratio=64 / 13),
}
# name -> (size, patch, input size, classes of timm's default weights: 1000 for an ImageNet fine-tune, else the
# CLIP embedding width)
_CLIP_VITS = {
    'vit_xsmall_patch16_clip_224': ('xsmall', 16, 224, 512),
    'vit_medium_patch16_clip_224': ('medium', 16, 224, 512),
    'vit_medium_patch32_clip_224': ('medium', 32, 224, 512),
    'vit_betwixt_patch32_clip_224': ('betwixt', 32, 224, 512),
    'vit_base_patch32_clip_224': ('base', 32, 224, 1000),
    'vit_base_patch32_clip_256': ('base', 32, 256, 512),
    'vit_base_patch32_clip_384': ('base', 32, 384, 1000),
    'vit_base_patch32_clip_448': ('base', 32, 448, 1000),
    'vit_base_patch32_clip_quickgelu_224': ('base', 32, 224, 512),
    'vit_base_patch16_clip_224': ('base', 16, 224, 1000),
    'vit_base_patch16_clip_384': ('base', 16, 384, 1000),
    'vit_base_patch16_clip_quickgelu_224': ('base', 16, 224, 512),
    'vit_base_patch16_plus_clip_240': ('base_plus', 16, 240, 640),
    'vit_large_patch14_clip_224': ('large', 14, 224, 1000),
    'vit_large_patch14_clip_336': ('large', 14, 336, 1000),
    'vit_large_patch14_clip_quickgelu_224': ('large', 14, 224, 768),
    'vit_large_patch14_clip_quickgelu_336': ('large', 14, 336, 768),
    'vit_huge_patch14_clip_224': ('huge', 14, 224, 1000),
    'vit_huge_patch14_clip_336': ('huge', 14, 336, 1000),
    'vit_huge_patch14_clip_378': ('huge', 14, 378, 1024),
    'vit_huge_patch14_clip_quickgelu_224': ('huge', 14, 224, 1024),
    'vit_huge_patch14_clip_quickgelu_378': ('huge', 14, 378, 1024),
    'vit_giant_patch14_clip_224': ('giant', 14, 224, 1024),
    'vit_gigantic_patch14_clip_224': ('gigantic', 14, 224, 1280),
    'vit_gigantic_patch14_clip_378': ('gigantic', 14, 378, 1280),
    'vit_gigantic_patch14_clip_quickgelu_224': ('gigantic', 14, 224, 1280),
}
# timm's default weights of the large ImageNet fine-tunes were normalised with mean = std = 0.5
_HALF = ('vit_large_patch14_clip_224', 'vit_large_patch14_clip_336')
for _name, (_size, _patch, _res, _classes) in _CLIP_VITS.items():
    _mean, _std = (HALF_MEAN, HALF_STD) if _name in _HALF else (OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
    register_variant(_name, VIT, mean=_mean, std=_std, input_size=_res, num_classes=_classes, patch_size=_patch,
                     spec=CLIP_QUICKGELU_SPEC if '_quickgelu_' in _name else CLIP_SPEC, **CLIP_SIZES[_size])
