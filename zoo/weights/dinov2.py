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

from .layout_error import CheckpointLayoutError, fused_qkv, gather_qkv, of_rank, required
from .rename import rename_keys, rules

_OFFICIAL_RULES = rules(r"""
    ^blocks\.\d+\.(\d+)\.  -> blocks.\1.  # chunked blocks (block_chunks > 0)
    ^cls_token$            -> prefix.cls
    ^reg_token$            -> prefix.registers
    ^register_tokens$      -> prefix.registers
    ^pos_embed$            -> pos_embed.weight
    \.mlp\.w12\.           -> .mlp.fc1.
    \.mlp\.w3\.            -> .mlp.fc2.
""")


def dinov2_from_official(state: dict) -> dict:
    """timm's or the official layout (see the module docstring); of a Depth Anything checkpoint, its encoder
    (``pretrained.*``; the ``depth_head.*`` is left out), as Depth Anything's metric fine-tuning starts."""
    if any(k.startswith('pretrained.') for k in state):
        state = {k[len('pretrained.'):]: v for k, v in state.items() if k.startswith('pretrained.')}
    state = {k: v for k, v in state.items() if k != 'mask_token'}
    if 'register_tokens' in state and 'pos_embed' in state:  # CLS row of the table -> the CLS token
        state['cls_token'], state['pos_embed'] = _fold_cls_row(state)
    return rename_keys(state, _OFFICIAL_RULES)


def _fold_cls_row(state: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The official register model's CLS token plus the table's CLS row, and the table without that row."""
    fix = ("The official DINOv2 register models (and Depth Anything's 'pretrained.*') save cls_token '1 1 d' "
           "and pos_embed '1 (1 + h w) d' beside register_tokens; re-save the checkpoint from such a model")
    cls = of_rank(required(state, 'cls_token', 'official DINOv2', "a checkpoint with register_tokens keeps "
                           "its CLS token in cls_token"), 'cls_token', '1 1 d', fix)
    pos = of_rank(state['pos_embed'], 'pos_embed', '1 (1 + h w) d', fix)
    if cls.shape[:2] != (1, 1) or pos.shape[0] != 1 or pos.shape[1] < 2 or pos.shape[2] != cls.shape[2]:
        raise CheckpointLayoutError('pos_embed', f"cls_token {tuple(cls.shape)} and pos_embed {tuple(pos.shape)} "
                                                 f"are not '1 1 d' and '1 (1 + h w) d' of one width d", fix)
    return cls + pos[:, :1], pos[:, 1:]


_HF_RULES = rules(r"""
    ^dinov2\.                                    ->
    ^embeddings\.cls_token$                      -> cls_token
    ^embeddings\.mask_token$                     -> mask_token
    ^embeddings\.register_tokens$                -> register_tokens
    ^embeddings\.position_embeddings$            -> pos_embed
    ^embeddings\.patch_embeddings\.projection\.  -> patch_embed.proj.
    ^encoder\.layer\.(\d+)\.                     -> blocks.\1.
    \.attention\.output\.dense\.                 -> .attn.proj.
    \.attention\.o_proj\.                        -> .attn.proj.
    \.attention\.q_proj\.                        -> .attention.attention.query.
    \.attention\.k_proj\.                        -> .attention.attention.key.
    \.attention\.v_proj\.                        -> .attention.attention.value.
    \.layer_scale(\d)\.lambda1$                  -> .ls\1.gamma
    \.mlp\.weights_in\.                          -> .mlp.w12.
    \.mlp\.weights_out\.                         -> .mlp.w3.
    ^layernorm\.                                 -> norm.
""")
_HF_QKV = re.compile(r'^(?P<layer>blocks\.\d+)\.attention\.attention\.(?P<part>query|key|value)\.'
                     r'(?P<kind>weight|bias)$')


def dinov2_from_hf(state: dict) -> dict:
    """transformers' layout (see the module docstring): renamed to the official one, q/k/v fused, then converted."""
    out, parts = gather_qkv(rename_keys(state, _HF_RULES), _HF_QKV)
    for (block, kind), qkv in parts.items():
        out[f'{block}.attn.qkv.{kind}'] = fused_qkv(qkv, f"encoder.layer.{block.split('.')[1]}.attention.attention",
                                                    kind, 'Dinov2Model')
    return dinov2_from_official(out)
