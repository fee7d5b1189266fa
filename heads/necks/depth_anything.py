"""Depth Anything's DPT neck (Yang et al. 2024, V1 and V2): the DPT neck on a patch-14 ViT, reassembled by factors
(x4, x2, x1, x0.5 of the patch grid) and fused at each finer level's own size.

A 37x37 grid (518 / 14) reassembles to 148, 74, 37 and 19 (the strided conv rounds up), so fusion upsamples each
result to the next level's size rather than by 2; the finest fused map is 8x the grid. Readout 'ignore' (the
released models; 'project' is the official ``use_clstoken=True``).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..registry import MODELS
from .dpt import DPTNeck


@MODELS.register_module()
class DepthAnythingNeck(DPTNeck):
    """``forward(maps, prefixes=None)`` -> fused maps deepest first, the last 8x the patch grid.

    ``reassemble_factors``: each level's resampling of the patch grid (transformers' ``reassemble_factors``);
    ``hidden_channels``: its width (``neck_hidden_sizes``, the official ``out_channels``); ``fusion_channels``:
    ``fusion_hidden_size`` (the official ``features``). Inputs need only be multiples of the patch size
    (``level_strides``: the patch's); ``coarsest_stride``: that of its coarsest map (the x0.5 level's, 28).
    """

    def __init__(self, in_channels: Sequence[int], in_strides: Sequence[int], prefix_names: Sequence[str] = (),
                 readout: str = 'ignore', hidden_channels: Sequence[int] = (48, 96, 192, 384),
                 reassemble_factors: Sequence[float] = (4, 2, 1, 0.5), fusion_channels: int = 64,
                 fusion_batch_norm: bool = False):
        if len(reassemble_factors) != len(in_strides):
            raise ValueError(f"DepthAnythingNeck needs one reassemble factor per level: got {list(reassemble_factors)}"
                             f" for {len(in_strides)} levels")
        super().__init__(in_channels, in_strides, prefix_names, readout, hidden_channels,
                         out_strides=[s / f for s, f in zip(in_strides, reassemble_factors)],
                         fusion_channels=fusion_channels, fusion_batch_norm=fusion_batch_norm, fusion_bias=True)
        self.level_strides = list(in_strides)  # fusion follows the levels' sizes: any multiple of the patch works
        self.coarsest_stride = math.ceil(max(s / f for s, f in zip(in_strides, reassemble_factors)))  # x0.5: 28

    def fusion_sizes(self, levels: list[torch.Tensor]) -> list:
        """Each fusion result upsampled to the next finer level's size (the finest one x2)."""
        return [x.shape[-2:] for x in levels[1:]] + [None]
