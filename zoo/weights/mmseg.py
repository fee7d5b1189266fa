"""mmsegmentation's ViT backbone layout -> :mod:`zoo.backbones.vit`.

mmseg's ViT (``mmseg/models/backbones/vit.py``, also what ``tools/model_converters/vit2mmseg.py`` writes from a
timm file): ``cls_token`` '1 1 d', ``pos_embed`` '1 (1 + h w) d', ``patch_embed.projection``, ``layers.{i}.ln1`` /
``ln2``, ``layers.{i}.attn.attn.in_proj_{weight,bias}`` (torch MultiheadAttention: rows q, k, v as timm's qkv),
``layers.{i}.attn.attn.out_proj``, ``layers.{i}.ffn.layers.0.0`` (fc1) and ``ffn.layers.1`` (fc2), and ``ln1`` for a
final norm (``final_norm=True``; a backbone here drops it like a classifier's ``norm``).

mmseg's whole DPT segmentor (its ``decode_head`` names this project's neck and heads) is a task-model layout:
:mod:`heads.layouts.mmseg`.
"""
from __future__ import annotations

from .rename import rename_keys, rules

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
