"""transformers' ``UperNetForSemanticSegmentation`` (a Swin backbone) -> this project's :class:`heads.models.Segmentor`
with :class:`heads.decode_heads.UPerHead` and :class:`heads.decode_heads.FCNHead` (the ``'transformers upernet'`` row of
:data:`heads.layouts.table.LAYOUTS`): the backbone through :func:`zoo.weights.swin.swin_from_hf` (less ``SwinModel``'s
final ``layernorm``, which transformers' backbone never applies), the heads renamed here.

Ours are mmseg's names: ``decode_head.psp_modules.{i}.1`` (the 1x1 ConvBNReLU after pooling), ``bottleneck``,
``lateral_convs.{i}``, ``fpn_convs.{i}``, ``fpn_bottleneck`` (each ``.conv`` + ``.bn``), ``conv_seg``;
``auxiliary_head.convs.{i}``, ``conv_cat``, ``conv_seg``. transformers (``UperNetForSemanticSegmentation``) names
each BatchNorm ``batch_norm`` and each classifier ``classifier``.
"""
from __future__ import annotations

from zoo.weights.rename import rename_keys, rules
from zoo.weights.swin import swin_from_hf

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


def upernet_from_hf(state: dict, model=None) -> dict:
    """transformers' UperNet keys -> ours: ``backbone.*`` (its Swin) through :func:`swin_from_hf`, the heads
    through :func:`upernet_heads_from_hf`."""
    swin = swin_from_hf({k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')})
    swin = {k: v for k, v in swin.items() if not k.startswith('norm.')}  # SwinModel's final norm: a backbone skips it
    return {**{f'backbone.{k}': v for k, v in swin.items()}, **upernet_heads_from_hf(state)}
