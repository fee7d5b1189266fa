"""mmsegmentation's ViT and Swin backbone layouts -> :mod:`zoo.backbones.vit` / :mod:`zoo.backbones.swin`.

mmseg's ViT (``mmseg/models/backbones/vit.py``, also what ``tools/model_converters/vit2mmseg.py`` writes from a
timm file): ``cls_token`` '1 1 d', ``pos_embed`` '1 (1 + h w) d', ``patch_embed.projection``, ``layers.{i}.ln1`` /
``ln2``, ``layers.{i}.attn.attn.in_proj_{weight,bias}`` (torch MultiheadAttention: rows q, k, v as timm's qkv),
``layers.{i}.attn.attn.out_proj``, ``layers.{i}.ffn.layers.0.0`` (fc1) and ``ffn.layers.1`` (fc2), and ``ln1`` for a
final norm (``final_norm=True``; a backbone here drops it like a classifier's ``norm``).

mmseg's Swin (``mmseg/models/backbones/swin.py``, also what ``tools/model_converters/swin2mmseg.py`` writes from
the official weights, e.g. ``swin_tiny_patch4_window7_224_20220317-1cdeb081.pth``): ``patch_embed.projection``,
``stages.{i}.blocks.{j}.{norm1,norm2}``, ``attn.w_msa.{qkv,proj,relative_position_bias_table}``, ``ffn.layers.0.0``
/ ``ffn.layers.1`` (fc1 / fc2), ``stages.{i}.downsample.{norm,reduction}`` merging at the end of stage i (the
official place) with its 2x2 neighbourhood gathered by ``nn.Unfold``: channels ordered '(c kh kw)' where ours
(timm's) are '(kw kh c)', so the merging norm and reduction columns are reordered; ``norm{i}`` the per-stage output
norms of ``out_indices`` (our ``out_norms``, in stage order).

mmseg's whole DPT segmentor (its ``decode_head`` names this project's neck and heads) is a task-model layout:
:mod:`heads.layouts.mmseg`.
"""
from __future__ import annotations

import re

import torch
from einops import rearrange

from .rename import rename_keys, rules
from .swin import swin_from_official

#: mmseg's ViT names -> ours (also read by :mod:`heads.layouts.mmseg` for a whole segmentor's ``backbone.*``).
VIT_RULES = rules(r"""
    ^cls_token$                                         -> prefix.cls
    ^pos_embed$                                         -> pos_embed.weight
    ^patch_embed\.projection\.                          -> patch_embed.proj.
    ^ln1\.                                              -> norm.  # final norm (final_norm=True); a backbone drops it
    ^layers\.(\d+)\.ln([12])\.                          -> blocks.\1.norm\2.
    ^layers\.(\d+)\.attn\.attn\.in_proj_(weight|bias)$  -> blocks.\1.attn.qkv.\2
    ^layers\.(\d+)\.attn\.attn\.out_proj\.              -> blocks.\1.attn.proj.
    ^layers\.(\d+)\.ffn\.layers\.0\.0\.                 -> blocks.\1.mlp.fc1.
    ^layers\.(\d+)\.ffn\.layers\.1\.                    -> blocks.\1.mlp.fc2.
""")


def vit_from_mmseg(state: dict) -> dict:
    """mmseg ViT keys -> :mod:`zoo.backbones.vit`; the ``backbone.*`` part of a whole mmseg model also reads."""
    if any(k.startswith('backbone.') for k in state):
        state = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    return rename_keys(state, VIT_RULES)


_SWIN_RULES = rules(r"""
    ^patch_embed\.projection\.                         -> patch_embed.proj.
    ^stages\.(\d+)\.blocks\.(\d+)\.attn\.w_msa\.        -> layers.\1.blocks.\2.attn.
    ^stages\.(\d+)\.blocks\.(\d+)\.ffn\.layers\.0\.0\.   -> layers.\1.blocks.\2.mlp.fc1.
    ^stages\.(\d+)\.blocks\.(\d+)\.ffn\.layers\.1\.     -> layers.\1.blocks.\2.mlp.fc2.
    ^stages\.(\d+)\.                                   -> layers.\1.
""")
_UNFOLD_ORDERED = re.compile(r'^stages\.\d+\.downsample\.(norm\.(weight|bias)|reduction\.weight)$')
_OUT_NORM = re.compile(r'^norm(\d+)\.')


def unfold_to_concat_order(value: torch.Tensor) -> torch.Tensor:
    """The last dimension of a merging weight from ``nn.Unfold``'s '(c kh kw)' order to ours, '(kw kh c)'."""
    return rearrange(value, '... (c kh kw) -> ... (kw kh c)', kh=2, kw=2)


def swin_from_mmseg(state: dict) -> dict:
    """mmseg Swin keys (see the module docstring) -> :mod:`zoo.backbones.swin`, through the official layout; the
    ``backbone.*`` part of a whole mmseg model also reads. Buffers (``relative_position_index``) are dropped."""
    if any(k.startswith('backbone.') for k in state):
        state = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    stages = sorted({int(m[1]) for k in state if (m := _OUT_NORM.match(k))})
    state = {_OUT_NORM.sub(lambda m: f'out_norms.{stages.index(int(m[1]))}.', k):
             unfold_to_concat_order(v) if _UNFOLD_ORDERED.match(k) else v for k, v in state.items()}
    return swin_from_official(rename_keys(state, _SWIN_RULES))
