"""transformers' key layout -> this project's, per backbone family.

CvT: ``CvtForImageClassification`` (``cvt.encoder.stages...``, ``layernorm``, ``classifier``) and ``CvtModel``
(``encoder.stages...``), from a ``save_pretrained`` folder, its weights file or a state dict.
CLIP image towers (the ``vit`` family): ``CLIPVisionModel``, ``CLIPVisionModelWithProjection``, ``CLIPModel``
(:mod:`.clip`); SigLIP image towers (also ``vit``): ``SiglipVisionModel``, ``SiglipModel`` (:mod:`.siglip`), told
apart by the keys; AIMv2 image encoders (also ``vit``): ``Aimv2VisionModel`` (:mod:`.aimv2`). DINOv2:
:mod:`.dinov2`. DINOv3 (``DINOv3ViTModel``): :mod:`.dinov3`. Swin V1 / V2 (``SwinModel``, ``SwinBackbone``, their V2 and
classifier kin): :mod:`.swin`.
"""
from __future__ import annotations

from .aimv2 import aimv2_from_hf, is_aimv2_layout
from .clip import clip_from_hf
from .dinov2 import dinov2_from_hf
from .dinov3 import dinov3_from_hf
from .rename import rename_keys, rules
from .siglip import is_siglip_layout, siglip2_from_hf, siglip_from_hf
from .swin import swin_from_hf

_PROJ = r'convolution_projection_(query|key|value)\.convolution_projection\.'
_CVT_RULES = [
    *rules(r"""
        ^cvt\.                                                ->
        ^encoder\.stages\.(\d+)\.                             -> stages.\1.
        \.embedding\.convolution_embeddings\.projection\.     -> .patch_embed.proj.
        \.embedding\.convolution_embeddings\.normalization\.  -> .patch_embed.norm.
        ^(stages\.\d+)\.cls_token$                            -> \1.prefix.cls
        \.layers\.(\d+)\.                                     -> .blocks.\1.
    """),
    (r'\.attention\.attention\.' + _PROJ + r'convolution\.', r'.attn.qkv.conv_\1.conv.'),
    (r'\.attention\.attention\.' + _PROJ + r'normalization\.', r'.attn.qkv.conv_\1.norm.'),
    *rules(r"""
        \.attention\.attention\.projection_(query|key|value)\.  -> .attn.qkv.\1.
        \.attn\.qkv\.(conv_)?(q|k|v)[a-z]*\.                    -> .attn.qkv.\1\2.
        \.attention\.output\.dense\.                            -> .attn.proj.
        \.intermediate\.dense\.                                 -> .mlp.fc1.
        \.output\.dense\.                                       -> .mlp.fc2.
        \.layernorm_before\.                                    -> .norm1.
        \.layernorm_after\.                                     -> .norm2.
        ^layernorm\.                                            -> norm.
        ^classifier\.                                           -> head.
    """),
]


def cvt_from_hf(state: dict) -> dict:
    return rename_keys(state, _CVT_RULES)


def vit_from_hf(state: dict) -> dict:
    """transformers' AIMv2, SigLIP or CLIP image tower, as the keys tell."""
    if is_aimv2_layout(state):
        return aimv2_from_hf(state)
    return siglip_from_hf(state) if is_siglip_layout(state) else clip_from_hf(state)


FROM_HF = {'cvt': cvt_from_hf, 'dinov2': dinov2_from_hf, 'dinov3': dinov3_from_hf, 'naflex': siglip2_from_hf,
           'swin': swin_from_hf, 'vit': vit_from_hf}
