"""UperNet's head names in transformers' and mmseg's checkpoints -> this project's :class:`heads.decode_heads.UPerHead`
and :class:`heads.decode_heads.FCNHead` (the head parts only; backbones are converted by :mod:`zoo.weights`).

Ours are mmseg's names: ``decode_head.psp_modules.{i}.1`` (the 1x1 ConvBNReLU after pooling), ``bottleneck``,
``lateral_convs.{i}``, ``fpn_convs.{i}``, ``fpn_bottleneck`` (each ``.conv`` + ``.bn``), ``conv_seg``;
``auxiliary_head.convs.{i}``, ``conv_cat``, ``conv_seg``. transformers (``UperNetForSemanticSegmentation``) names
each BatchNorm ``batch_norm`` and each classifier ``classifier``.
"""
from __future__ import annotations

from zoo.weights.rename import rename_keys, rules

#: transformers' UperNet head keys -> ours.
HF_HEAD_RULES = rules(r"""
    ^(decode_head|auxiliary_head)\.(.+)\.batch_norm\.  -> \1.\2.bn.
    ^(decode_head|auxiliary_head)\.classifier\.        -> \1.conv_seg.
""")
HEAD_PREFIXES = ('decode_head.', 'auxiliary_head.')


def upernet_heads_from_hf(state: dict) -> dict:
    """The ``decode_head.*`` / ``auxiliary_head.*`` keys of a transformers UperNet state dict, renamed to ours (other
    keys are left out)."""
    return rename_keys({k: v for k, v in state.items() if k.startswith(HEAD_PREFIXES)}, HF_HEAD_RULES)
