"""timm's NaFlexViT keys (``naflexvit_*``) -> :mod:`zoo.backbones.naflex`: the ``embeds.*`` module's patch Linear,
position table(s) and prefix tokens move to this project's names; the blocks and heads are timm's ViT keys
(:func:`zoo.weights.timm.vit_from_timm`: the MAP head's q / kv / proj into the core Attention's slots)."""
from __future__ import annotations

from .rename import rename_keys, rules

_EMBEDS_RULES = rules(r"""
    ^embeds\.proj\.            -> patch_embed.proj.
    ^embeds\.pos_embed$        -> pos_embed.weight
    ^embeds\.pos_embed_([yx])$ -> pos_embed.\1
    ^embeds\.cls_token$        -> prefix.cls
    ^embeds\.reg_token$        -> prefix.registers
""")


def naflex_from_timm(state: dict) -> dict:
    """timm's ``naflexvit_*`` state dict -> :class:`zoo.backbones.naflex.NaFlexClassifier` keys (tensors as they
    are: the patch Linear's inputs are (row, column, channel) in both, the table '1 h w d')."""
    from .timm import vit_from_timm  # the ViT part of the layout
    return vit_from_timm(rename_keys(state, _EMBEDS_RULES))
