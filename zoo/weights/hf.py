"""transformers' key layout -> this project's, per backbone family.

CvT: ``CvtForImageClassification`` (``cvt.encoder.stages...``, ``layernorm``, ``classifier``) and ``CvtModel``
(``encoder.stages...``), from a ``save_pretrained`` folder, its weights file or a state dict.
"""
from __future__ import annotations

from .dinov2 import dinov2_from_hf
from .rename import rename_keys

_PROJ = r'convolution_projection_(query|key|value)\.convolution_projection\.'
_CVT_RULES = [
    (r'^cvt\.', ''),
    (r'^encoder\.stages\.(\d+)\.', r'stages.\1.'),
    (r'\.embedding\.convolution_embeddings\.projection\.', '.patch_embed.proj.'),
    (r'\.embedding\.convolution_embeddings\.normalization\.', '.patch_embed.norm.'),
    (r'^(stages\.\d+)\.cls_token$', r'\1.prefix.cls'),
    (r'\.layers\.(\d+)\.', r'.blocks.\1.'),
    (r'\.attention\.attention\.' + _PROJ + r'convolution\.', r'.attn.qkv.conv_\1.conv.'),
    (r'\.attention\.attention\.' + _PROJ + r'normalization\.', r'.attn.qkv.conv_\1.norm.'),
    (r'\.attention\.attention\.projection_(query|key|value)\.', r'.attn.qkv.\1.'),
    (r'\.attn\.qkv\.(conv_)?(q|k|v)[a-z]*\.', r'.attn.qkv.\1\2.'),  # query/key/value -> q/k/v
    (r'\.attention\.output\.dense\.', '.attn.proj.'),
    (r'\.intermediate\.dense\.', '.mlp.fc1.'),
    (r'\.output\.dense\.', '.mlp.fc2.'),
    (r'\.layernorm_before\.', '.norm1.'),
    (r'\.layernorm_after\.', '.norm2.'),
    (r'^layernorm\.', 'norm.'),
    (r'^classifier\.', 'head.'),
]


def cvt_from_hf(state: dict) -> dict:
    return rename_keys(state, _CVT_RULES)


FROM_HF = {'cvt': cvt_from_hf, 'dinov2': dinov2_from_hf}
