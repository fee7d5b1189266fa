"""Multi-level features (as EsViT uses every stage, here every block): a plain ViT's L block outputs mixed into the
G levels a DPT neck reassembles, each a learned softmax-weighted sum over all L, so every block contributes.

Level g = sum_l softmax(logits[g])_l * maps[l] (the prefix tokens mixed with the same weights). The logits start
at -|l - t_g| / spread, t_g the block a plain DPT taps for level g (evenly spaced, as
:func:`zoo.backbones.vit.default_taps`): at initialisation level g is mostly its usual block, blended with its
neighbours; training moves the weights.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def default_centres(levels: int, groups: int) -> list[int]:
    """The blocks a plain DPT taps for ``groups`` levels of a ``levels``-block ViT: (2, 5, 8, 11) for 12 and 4."""
    step = levels / groups
    return [round(step * (g + 1)) - 1 for g in range(groups)]


class LevelMix(nn.Module):
    """``forward(maps, prefixes)`` with L maps 'b c h w' (and L prefix tensors 'b p c' or None) -> G of each.

    ``logits`` 'G L' are learned; :attr:`weights` gives their softmax over the L levels.
    """

    def __init__(self, levels: int, groups: int, spread: float = 1.0):
        super().__init__()
        if levels < groups:
            raise ValueError(f"level mixing needs at least as many backbone levels as neck levels: got {levels} "
                             f"backbone levels for {groups}; tap every block (out_indices=range(depth))")
        centres = torch.tensor(default_centres(levels, groups), dtype=torch.float32)
        self.logits = nn.Parameter(-(torch.arange(levels)[None, :] - centres[:, None]).abs() / spread)

    @property
    def weights(self) -> torch.Tensor:
        """'G L': each neck level's weights over the backbone levels (rows sum to 1)."""
        return self.logits.softmax(dim=-1)

    @staticmethod
    def _mix(weights: torch.Tensor, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        stacked = torch.stack(list(tensors))  # L b ...
        mixed = torch.einsum('gl,l...->g...', weights.to(stacked.dtype), stacked)  # G b ...
        return list(mixed.unbind(0))

    def forward(self, maps: Sequence[torch.Tensor], prefixes: Sequence[torch.Tensor] | None = None):
        if len(maps) != self.logits.shape[1]:
            raise ValueError(f"LevelMix was built for {self.logits.shape[1]} backbone levels, got {len(maps)} maps")
        weights = self.weights
        return self._mix(weights, maps), (None if prefixes is None else self._mix(weights, prefixes))

    @classmethod
    def for_neck(cls, in_channels: Sequence[int], in_strides: Sequence[int], groups: int) -> LevelMix:
        """A mixer of the backbone levels ``in_channels``/``in_strides`` into ``groups``; the levels must share one
        width and stride (a plain ViT's blocks)."""
        if len(set(in_channels)) != 1 or len(set(in_strides)) != 1:
            raise ValueError(f"level mixing sums backbone levels of one width and stride (a plain ViT's blocks); got "
                             f"channels {list(in_channels)} and strides {list(in_strides)}")
        return cls(len(in_channels), groups)

    def extra_repr(self) -> str:
        return f"levels={self.logits.shape[1]}, groups={self.logits.shape[0]}"
