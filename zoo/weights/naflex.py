"""timm's NaFlexViT keys (``naflexvit_*``) -> :mod:`zoo.backbones.naflex`: the ``embeds.*`` module's patch Linear,
position table(s) and prefix tokens move to this project's names (:func:`naflex_embeds_to_vit`); the blocks and heads
are timm's ViT keys, which :func:`zoo.weights.timm.vit_from_timm` reads after it (``FROM_TIMM['naflex']``: the MAP
head's q / kv / proj into the core Attention's slots)."""
from __future__ import annotations

from .rename import rename_keys, rules

_EMBEDS_RULES = rules(r"""
    ^embeds\.proj\.            -> patch_embed.proj.
    ^embeds\.pos_embed$        -> pos_embed.weight
    ^embeds\.pos_embed_([yx])$ -> pos_embed.\1
    ^embeds\.cls_token$        -> prefix.cls
    ^embeds\.reg_token$        -> prefix.registers
""")


def naflex_embeds_to_vit(state: dict) -> dict:
    """timm's ``embeds.*`` keys renamed (tensors as they are: the patch Linear's inputs are (row, column, channel) in
    both layouts, the table '1 h w d'); every other key unchanged."""
    return rename_keys(state, _EMBEDS_RULES)
