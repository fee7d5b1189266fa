"""DINOv2 checkpoints (timm, official, transformers) -> :mod:`zoo.backbones.dinov2`.

- timm: ViT keys (``cls_token``, ``reg_token``, ``pos_embed``, ``blocks.N.ls1.gamma``, ``mlp.fc1``/``fc2``).
- official (facebookresearch/dinov2, Depth Anything's ``pretrained.*``): timm's names plus ``mask_token``
  (unused, dropped), ``register_tokens``, SwiGLU ``mlp.w12``/``mlp.w3``, blocks possibly in chunks
  (``blocks.C.N.``); the position table has a CLS row even with registers, folded into the CLS token here.
- transformers (``Dinov2Model``, ``Dinov2WithRegistersModel``, or the same under ``dinov2.``): ``embeddings.*``,
  ``encoder.layer.N.*`` with separate query/key/value (q/k/v/o_proj in transformers 5's memory; fused here),
  ``layer_scale{1,2}.lambda1``, ``mlp.weights_in``/``weights_out`` (SwiGLU), ``layernorm``.
"""
from __future__ import annotations

import re

import torch

from .rename import rename_keys

_OFFICIAL_RULES = [
    (r'^blocks\.\d+\.(\d+)\.', r'blocks.\1.'),  # chunked blocks (block_chunks > 0)
    (r'^cls_token$', 'prefix.cls'), (r'^reg_token$', 'prefix.registers'), (r'^register_tokens$', 'prefix.registers'),
    (r'^pos_embed$', 'pos_embed.weight'),
    (r'\.mlp\.w12\.', '.mlp.fc1.'), (r'\.mlp\.w3\.', '.mlp.fc2.'),
]


def dinov2_from_official(state: dict) -> dict:
    """timm's or the official layout (see the module docstring); of a Depth Anything checkpoint, its encoder
    (``pretrained.*``; the ``depth_head.*`` is left out), as Depth Anything's metric fine-tuning starts."""
    if any(k.startswith('pretrained.') for k in state):
        state = {k[len('pretrained.'):]: v for k, v in state.items() if k.startswith('pretrained.')}
    state = {k: v for k, v in state.items() if k != 'mask_token'}
    if 'register_tokens' in state and 'pos_embed' in state:  # CLS row of the table -> the CLS token
        pos = state.pop('pos_embed')
        state['cls_token'] = state['cls_token'] + pos[:, :1]
        state['pos_embed'] = pos[:, 1:]
    return rename_keys(state, _OFFICIAL_RULES)


_HF_RULES = [
    (r'^dinov2\.', ''),
    (r'^embeddings\.cls_token$', 'cls_token'), (r'^embeddings\.mask_token$', 'mask_token'),
    (r'^embeddings\.register_tokens$', 'register_tokens'), (r'^embeddings\.position_embeddings$', 'pos_embed'),
    (r'^embeddings\.patch_embeddings\.projection\.', 'patch_embed.proj.'),
    (r'^encoder\.layer\.(\d+)\.', r'blocks.\1.'),
    (r'\.attention\.output\.dense\.', '.attn.proj.'), (r'\.attention\.o_proj\.', '.attn.proj.'),
    (r'\.attention\.q_proj\.', '.attention.attention.query.'), (r'\.attention\.k_proj\.', '.attention.attention.key.'),
    (r'\.attention\.v_proj\.', '.attention.attention.value.'),
    (r'\.layer_scale(\d)\.lambda1$', r'.ls\1.gamma'),
    (r'\.mlp\.weights_in\.', '.mlp.w12.'), (r'\.mlp\.weights_out\.', '.mlp.w3.'),
    (r'^layernorm\.', 'norm.'),
]
_HF_QKV = re.compile(r'^(blocks\.\d+)\.attention\.attention\.(query|key|value)\.(weight|bias)$')


def dinov2_from_hf(state: dict) -> dict:
    """transformers' layout (see the module docstring): renamed to the official one, q/k/v fused, then converted."""
    out, parts = {}, {}
    for key, value in rename_keys(state, _HF_RULES).items():
        match = _HF_QKV.match(key)
        if match:
            parts.setdefault((match[1], match[3]), {})[match[2]] = value
        else:
            out[key] = value
    for (block, kind), qkv in parts.items():
        out[f'{block}.attn.qkv.{kind}'] = torch.cat([qkv['query'], qkv['key'], qkv['value']])
    return dinov2_from_official(out)
