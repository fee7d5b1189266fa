"""The original authors' key layouts -> this project's, per backbone family.

CvT (microsoft/CvT, ``lib/models/cls_cvt.py``): ``stage{i}.patch_embed.{proj,norm}``, ``stage{i}.cls_token``,
``stage{i}.blocks.{j}.attn.conv_proj_{q,k,v}.{conv,bn}``, ``...attn.proj_{q,k,v}``, ``...attn.proj``,
``norm1``/``norm2``/``mlp.fc1``/``mlp.fc2`` and the final ``norm``/``head`` (names as ours). Note that the
official model runs its MLPs with QuickGELU: build with ``act='quick_gelu'`` to reproduce its outputs.

CrossViT (IBM/CrossViT): timm's layout but ``pos_embed.{i}`` / ``cls_token.{i}`` parameter lists; one converter
reads both.

DINOv3 (facebookresearch/dinov3: ``storage_tokens``, masked ``qkv.bias``, ``mlp.w1/w2/w3``): see
:mod:`zoo.weights.dinov3`.

NVIDIA's C-RADIO (NVlabs/RADIO, ``radio_model.model.*``; the only 'official' ViT and NaFlex layout here): see
:mod:`zoo.weights.radio`.

Swin V1 / V2 (microsoft/Swin-Transformer, ``layers.N.blocks.M...``, patch merging at the end of a stage): see
:mod:`zoo.weights.swin`.
"""
from __future__ import annotations

from .dinov2 import dinov2_from_official
from .dinov3 import dinov3_from_official
from .radio import radio_from_official, radio_naflex_from_official
from .rename import rename_keys, rules
from .swin import swin_from_official
from .timm import crossvit_from_timm

_CVT_RULES = rules(r"""
    ^stage(\d+)\.                      -> stages.\1.
    ^(stages\.\d+)\.cls_token$         -> \1.prefix.cls
    \.attn\.conv_proj_(q|k|v)\.bn\.    -> .attn.qkv.conv_\1.norm.
    \.attn\.conv_proj_(q|k|v)\.conv\.  -> .attn.qkv.conv_\1.conv.
    \.attn\.proj_(q|k|v)\.             -> .attn.qkv.\1.
""")


def cvt_from_official(state: dict) -> dict:
    return rename_keys(state, _CVT_RULES)


FROM_OFFICIAL = {'cvt': cvt_from_official, 'crossvit': crossvit_from_timm, 'swin': swin_from_official,
                 'dinov2': dinov2_from_official, 'dinov3': dinov3_from_official, 'vit': radio_from_official,
                 'naflex': radio_naflex_from_official}
