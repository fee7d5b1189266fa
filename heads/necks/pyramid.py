"""Feature pyramids for detection: strides 4..32 plus a max-pooled level, from any zoo backbone.

Plain backbones (one stride, e.g. ViT/16) get ViTDet's simple feature pyramid (Li et al. 2022): the last map
alone, resampled by stride / target (x4, x2, x1, x0.5 for /16), each level projected by a 1x1 and a 3x3
conv with channel LayerNorm. A stride that is not a power of two (patch 14: DINOv2, EVA-02, AIMv2, CLIP-L/14) is
first resampled bilinearly to the nearest power-of-two stride (14 -> 16: x0.875, pixel centres kept in place), then
goes through the same levels. Hierarchical backbones (CvT, CoAtNet) are already multi-scale: an FPN
(torchvision's, lateral 1x1 + top-down sum + 3x3) over their last map at each stride.
Both return the maps finest first, the max-pooled level last (stride x2 of the coarsest).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import FeaturePyramidNetwork
from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

from ..registry import MODELS


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of 'b c h w' maps (detectron2's 'LN' norm for convolutions)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def rescaler(channels: int, factor: float) -> tuple[nn.Module, int]:
    """(module, its output channels) resampling by ``factor``: each x2 up a 2x2 transposed conv halving the
    channels (LayerNorm + GELU between two), x1 identity, x1/k a kxk max-pool."""
    if factor < 1:
        return nn.MaxPool2d(round(1 / factor)), channels
    layers = []
    for step in range(round(math.log2(factor))):
        if step:
            layers += [LayerNorm2d(channels), nn.GELU()]
        layers.append(nn.ConvTranspose2d(channels, channels // 2, 2, stride=2))
        channels //= 2
    return nn.Sequential(*layers), channels


def conv_ln(in_channels: int, out_channels: int, kernel_size: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False),
                         LayerNorm2d(out_channels))


@MODELS.register_module()
class SimpleFeaturePyramid(nn.Module):
    """ViTDet's pyramid from one map 'b c h/s w/s': ``forward(maps)`` reads ``maps[-1]`` and returns a map
    per ``out_strides`` entry, then ``max_pool2d(k=1, s=2)`` of the coarsest ('pool' level).

    A stride s that is not a power of two is first regridded to ``grid_stride`` = the power of two nearest s
    (bilinear, ``scale_factor`` s / grid_stride, align_corners=False: output cell i is centred on image pixel
    (i + 1/2) * grid_stride, as the input's cell j on (j + 1/2) * s); the map is then floor(h * s / grid_stride)
    cells, which covers the image when h * s does (a padded input: :class:`heads.detection.PyramidBackbone` crops)."""

    def __init__(self, in_channels, in_strides, out_channels: int = 256, out_strides=(4, 8, 16, 32)):
        super().__init__()
        channels, stride = list(in_channels)[-1], list(in_strides)[-1]
        self.in_stride = stride
        self.grid_stride = 2 ** round(math.log2(stride))
        self.levels = nn.ModuleList()
        for target in out_strides:
            factor = self.grid_stride / target
            if factor not in (8, 4, 2, 1, 0.5, 0.25):
                choices = [self.grid_stride // 8 * 2 ** k for k in range(6)]
                raise ValueError(f"SimpleFeaturePyramid resamples by powers of two in [1/4, 8] from stride "
                                 f"{self.grid_stride} (the input's stride {stride} regridded); to {target} is "
                                 f"x{factor}: choose out_strides among {choices}")
            if factor > 1 and channels // round(factor) < 1:
                raise ValueError(f"SimpleFeaturePyramid halves the channels at each x2 upsampling: from {channels} "
                                 f"channels at stride {self.grid_stride}, stride {target} (x{factor:g}) would have "
                                 f"0; give it a map of at least {round(factor)} channels or leave stride "
                                 f"{target} out of out_strides")
            resample, width = rescaler(channels, factor)
            self.levels.append(nn.Sequential(resample, conv_ln(width, out_channels, 1),
                                             conv_ln(out_channels, out_channels, 3)))
        self.out_channels = out_channels
        self.out_strides = [*out_strides, 2 * out_strides[-1]]

    def regrid(self, x: torch.Tensor) -> torch.Tensor:
        """'b c h w' at the input's stride -> at ``grid_stride`` (unchanged when they are equal)."""
        if self.grid_stride == self.in_stride:
            return x
        return F.interpolate(x, scale_factor=self.in_stride / self.grid_stride, mode='bilinear', align_corners=False,
                             recompute_scale_factor=False)

    def forward(self, maps: list[torch.Tensor]) -> list[torch.Tensor]:
        x = self.regrid(maps[-1])
        pyramid = [level(x) for level in self.levels]
        return pyramid + [F.max_pool2d(pyramid[-1], kernel_size=1, stride=2)]


@MODELS.register_module()
class HierarchicalFPN(nn.Module):
    """torchvision's FPN (+ max-pooled level) over the last map at each distinct stride of ``in_strides``."""

    def __init__(self, in_channels, in_strides, out_channels: int = 256):
        super().__init__()
        last_at_stride = {s: i for i, s in enumerate(in_strides)}  # a repeated stride keeps its last map
        self.taps = sorted(last_at_stride.values(), key=lambda i: in_strides[i])
        if [in_strides[i] for i in self.taps] != sorted(set(in_strides)) or len(self.taps) < 2:
            raise ValueError(f"HierarchicalFPN needs maps at two or more increasing strides, got {list(in_strides)}")
        self.fpn = FeaturePyramidNetwork([in_channels[i] for i in self.taps], out_channels, LastLevelMaxPool())
        self.out_channels = out_channels
        strides = [in_strides[i] for i in self.taps]
        self.out_strides = [*strides, 2 * strides[-1]]

    def forward(self, maps: list[torch.Tensor]) -> list[torch.Tensor]:
        return list(self.fpn({str(k): maps[i] for k, i in enumerate(self.taps)}).values())


def pyramid_for(in_channels, in_strides, out_channels: int = 256) -> nn.Module:
    """The simple pyramid for a plain backbone (one stride), an FPN for a hierarchical one."""
    if len(set(in_strides)) == 1:
        return SimpleFeaturePyramid(in_channels, in_strides, out_channels)
    return HierarchicalFPN(in_channels, in_strides, out_channels)
