"""mmsegmentation's whole UperNet segmentor with a Swin backbone -> :class:`heads.models.Segmentor` with
:class:`heads.decode_heads.UPerHead` and :class:`heads.decode_heads.FCNHead`, and telling it from this project's layout
and from mmseg's DPT (:mod:`.mmseg`).

mmseg's ``EncoderDecoder`` (``upernet_swin-*`` configs; checkpoints ``{'meta': ..., 'state_dict': ...}``):
``backbone.*`` is mmseg's Swin (:func:`zoo.weights.mmseg.swin_from_mmseg`); the heads' names are this project's already
(``decode_head.psp_modules.{i}.1`` / ``bottleneck`` / ``lateral_convs.{i}`` / ``fpn_convs.{i}`` / ``fpn_bottleneck``,
each ``.conv`` + ``.bn``, ``decode_head.conv_seg``; ``auxiliary_head.convs.{i}`` / ``conv_cat`` / ``conv_seg``).

Detection (:func:`is_mmseg_upernet`) reads names only mmseg's Swin has (``backbone.stages.{i}.blocks.{j}.attn.w_msa.``,
``backbone.stages.{i}.blocks.{j}.ffn.layers.``) together with its UperNet head's ``decode_head.psp_modules.``; such a
checkpoint is never read as mmseg's DPT (whose signature ``backbone.patch_embed.projection`` and
``decode_head.conv_seg`` it shares).
"""
from __future__ import annotations

import re

from zoo.weights.mmseg import swin_from_mmseg

_SWIN = re.compile(r'^backbone\.stages\.\d+\.blocks\.\d+\.(attn\.w_msa|ffn\.layers)\.')
_UPER = re.compile(r'^decode_head\.(psp_modules|fpn_bottleneck)\.')


def is_mmseg_upernet(state) -> bool:
    """Whether a (unwrapped) state dict is an mmseg UperNet with its Swin backbone."""
    keys = [k for k in state if isinstance(k, str)]
    return any(_SWIN.match(k) for k in keys) and any(_UPER.match(k) for k in keys)


def upernet_from_mmseg(state: dict) -> dict:
    """A whole mmseg UperNet (Swin) segmentor's keys -> ours: the backbone converted, the heads as they are."""
    backbone = {k: v for k, v in state.items() if k.startswith('backbone.')}
    rest = {k: v for k, v in state.items() if not k.startswith('backbone.')}
    return {**{f'backbone.{k}': v for k, v in swin_from_mmseg(backbone).items()}, **rest}
