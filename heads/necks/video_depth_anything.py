"""Video Depth Anything's DPT neck (Chen et al. 2025): Depth Anything V2's neck with temporal attention
(:class:`.temporal.TemporalModule`) on the two coarsest reassembled levels, before their fusion convs, and after
the two deepest fusion blocks, so that the depth of a frame sees the clip's other frames.

``forward(maps, prefixes=None, frames=t, cache=None)`` takes the backbone's maps of a batch of whole clips,
'(b t) c h w', each clip's ``t`` frames consecutive; with a :class:`.temporal.TemporalCache` (streaming), the ``t``
frames follow the cached ones: the four temporal modules read their context from it, in the order they run
(``temporal.0`` .. ``temporal.3``), and record the new frames' states in it.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..registry import MODELS
from .depth_anything import DepthAnythingNeck
from .temporal import TemporalCache, TemporalModule


@MODELS.register_module()
class VideoDepthAnythingNeck(DepthAnythingNeck):
    """:class:`DepthAnythingNeck` (its arguments) with four temporal modules (module docstring), ``temporal``:
    ``max_frames`` (the released models: 32), ``temporal_heads`` heads each."""

    def __init__(self, in_channels: Sequence[int], in_strides: Sequence[int], prefix_names: Sequence[str] = (),
                 readout: str = 'ignore', hidden_channels: Sequence[int] = (48, 96, 192, 384),
                 reassemble_factors: Sequence[float] = (4, 2, 1, 0.5), fusion_channels: int = 64,
                 fusion_batch_norm: bool = False, max_frames: int = 32, temporal_heads: int = 8):
        super().__init__(in_channels, in_strides, prefix_names, readout, hidden_channels, reassemble_factors,
                         fusion_channels, fusion_batch_norm)
        if len(hidden_channels) != 4:
            raise ValueError(f"VideoDepthAnythingNeck has four levels, got hidden_channels {list(hidden_channels)}")
        widths = (hidden_channels[2], hidden_channels[3], fusion_channels, fusion_channels)
        self.temporal = nn.ModuleList(TemporalModule(c, temporal_heads, max_frames=max_frames) for c in widths)
        self.max_frames = max_frames

    def forward(self, maps: list[torch.Tensor], prefixes: list[torch.Tensor] | None = None,
                frames: int = 1, cache: TemporalCache | None = None) -> list[torch.Tensor]:
        levels = self.reassembled(maps, prefixes)
        levels[2] = self.temporal[0](levels[2], frames, cache)
        levels[3] = self.temporal[1](levels[3], frames, cache)
        return self.fuse(levels, after=lambda i, fused: self.temporal[2 + i](fused, frames, cache) if i < 2 else fused)
