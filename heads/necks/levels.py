"""Multi-scale levels for heads that read a pyramid (UperNet): any zoo backbone -> maps at strides 4, 8, 16, 32.

- hierarchical backbones (Swin, CvT, CoAtNet, ...: taps at two or more strides): the last tapped map at each stride,
  as they are (``out_channels`` the backbone's);
- plain backbones (one stride, ViT/16, DINOv2/14, ...): ViTDet's simple feature pyramid from the last map
  (:class:`heads.necks.SimpleFeaturePyramid`: deconvolution / identity / max-pool, then 1x1 and 3x3 convs with
  channel LayerNorm) to ``out_strides``, without its extra pooled level; ``out_channels`` wide.

``forward(maps, prefixes)`` returns the levels deepest first, as every neck here (the task model hands heads that
read all levels the list finest first: :meth:`heads.models.DenseModel.head_input`).
"""
from __future__ import annotations

import torch
from torch import nn

from ..registry import MODELS
from .pyramid import SimpleFeaturePyramid


@MODELS.register_module()
class PyramidLevels(nn.Module):
    """``level_strides`` / ``level_channels``: the levels' strides and widths, finest first."""

    def __init__(self, in_channels, in_strides, prefix_names=(), out_channels: int = 256,
                 out_strides=(4, 8, 16, 32)):
        super().__init__()
        in_channels, in_strides = list(in_channels), list(in_strides)
        if len(set(in_strides)) == 1:
            self.pyramid = SimpleFeaturePyramid(in_channels, in_strides, out_channels, tuple(out_strides))
            self.taps = None
            self.level_strides = list(out_strides)
            self.level_channels = [out_channels] * len(out_strides)
        else:
            last_at_stride = {s: i for i, s in enumerate(in_strides)}  # a repeated stride keeps its last map
            self.taps = [last_at_stride[s] for s in sorted(last_at_stride)]
            if [in_strides[i] for i in self.taps] != sorted(last_at_stride):
                raise ValueError(f"PyramidLevels needs a hierarchical backbone's strides to increase, got {in_strides}")
            self.pyramid = None
            self.level_strides = [in_strides[i] for i in self.taps]
            self.level_channels = [in_channels[i] for i in self.taps]

    def forward(self, maps: list[torch.Tensor], prefixes=None) -> list[torch.Tensor]:
        levels = self.pyramid(maps)[:-1] if self.pyramid is not None else [maps[i] for i in self.taps]
        return levels[::-1]
