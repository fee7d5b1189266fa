"""The backbone contract: what every dense backbone of the zoo gives, and all that heads/, export and the tools may
rely on. A family meets it by subclassing :class:`Backbone` (docs/adding_a_backbone.md shows how).

A backbone, built by :func:`zoo.create_backbone`, takes images 'b c H W' and returns one map per tap:

- ``forward_taps(x) -> Taps(maps, prefix)``: ``maps`` are NCHW tensors 'b c_i h_i w_i', one per entry of
  ``out_indices``; ``prefix`` holds, for token backbones, each tap's prefix tokens 'b p c_i' (p = len(prefix_names)),
  and is None for backbones without prefix tokens. A hybrid (convolutional stages, then tokens) gives None in place
  of the prefix of each tap that is a convolutional map: ``prefix_taps[i]`` says whether tap i carries prefix tokens.
  ``forward(x)`` returns ``maps``.
- ``out_channels[i]`` is the channel count of map i and ``out_strides[i]`` its stride: for an input whose sides are
  multiples of ``input_multiple``, map i is exactly (H / out_strides[i], W / out_strides[i]).
  ``pooled_last_level``: the last map is an extra max-pooled level (detection pyramids), ceil(H / stride) in size.
- ``prefix_names``: the names of the prefix tokens each tap carries ('cls', 'dist', 'reg0', ...), [] for none.
- ``in_chans`` and ``min_input_size``: the input channels, and the smallest side the backbone runs on.
- ``no_weight_decay()``: the names (as ``named_parameters()`` gives them) of the parameters that take no weight
  decay, declared by the modules owning them (:class:`zoo.core.NoWeightDecay`), as timm's ``no_weight_decay``.

Each family's encoder (the module its backbone and classifier share) names its weight layouts' ``family`` and, in
``classifier_only``, the key prefixes of the classifier's own parameters (final norm, heads): they are dropped without
complaint when a classifier checkpoint loads into the backbone (:mod:`zoo.weights.load`).
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .core.weight_decay import no_weight_decay_of


class Taps(NamedTuple):
    """What :meth:`Backbone.forward_taps` returns: per tap a map 'b c h w', and prefix tokens 'b p c' (or None)."""
    maps: list[torch.Tensor]
    prefix: list[torch.Tensor | None] | None


class Backbone(nn.Module):
    """Base class of every dense backbone (the module docstring is the contract).

    A subclass sets ``out_indices``, ``out_channels``, ``out_strides`` and ``input_multiple`` (and, where they differ
    from the defaults here, ``prefix_names``, ``in_chans``, ``min_input_size``) and implements :meth:`forward_taps`.
    """
    out_indices: tuple[int, ...]
    out_channels: list[int]
    out_strides: list[int]
    input_multiple: int
    prefix_names: list[str] = []
    pooled_last_level: bool = False
    in_chans: int = 3
    min_input_size: int = 1

    @property
    def prefix_taps(self) -> list[bool]:
        """Per tap, whether it carries prefix tokens: every tap of a token backbone, none of the others."""
        return [bool(self.prefix_names)] * len(self.out_indices)

    def forward_taps(self, x: torch.Tensor) -> Taps:
        raise NotImplementedError(f"{type(self).__name__} must implement forward_taps (see zoo.contract)")

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return self.forward_taps(x).maps

    def no_weight_decay(self) -> set[str]:
        return no_weight_decay_of(self)

    @property
    def coarsest_stride(self) -> int:
        return max(self.out_strides)
