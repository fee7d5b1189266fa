"""UperNet's decode head (Xiao et al. 2018, "Unified Perceptual Parsing"), as mmseg's ``UPerHead``.

Reads every pyramid level, finest first ('b c_i h_i w_i', strides e.g. 4, 8, 16, 32):

- pyramid pooling on the coarsest level: for each scale s, adaptive average pool to s x s, 1x1 ConvBNReLU, bilinear
  back to the level's size; those and the level itself concatenated, 3x3 ConvBNReLU (``bottleneck``) -> top lateral;
- FPN: the other levels through 1x1 ConvBNReLU laterals; top-down, each lateral plus the bilinearly resized coarser
  one; a 3x3 ConvBNReLU on each but the top;
- fuse: all levels resized to the finest and concatenated, 3x3 ConvBNReLU (``fpn_bottleneck``), dropout, 1x1
  classifier ``conv_seg``: 'b k h_0 w_0' logits at the finest level's stride.

Every resize is bilinear with ``align_corners`` False (as mmseg's and transformers' UperNet).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import statically_known_true

from zoo.core.resize import interpolate

from ..registry import MODELS
from .adaptive_pool import AdaptivePool
from .uper_conv import ClassifierTail, ConvBNReLU


def resize(x: torch.Tensor, size) -> torch.Tensor:
    """'b c h w -> b c H W' bilinear (align_corners False); unchanged when already that size.

    The shortcut is taken only where the sizes are known equal without a guard (always in eager PyTorch): under
    torch.export a pooling branch's s x s map compared with a dynamic level size s_h would guard s_h == s at the
    traced size, and torch 2.14's re-trace for ONNX then turns that guard into a fixed size (the level's height
    folded to its traced value in every reshape: wrong or failing at other sizes). The resize at equal size is the
    identity anyway."""
    if all(statically_known_true(a == b) for a, b in zip(x.shape[-2:], size)):
        return x
    return interpolate(x, size=tuple(size), mode='bilinear', align_corners=False)


class PyramidPooling(nn.ModuleList):
    """PSPNet's pooling branches: 'b c h w' -> a list of 'b channels h w', one per pool scale (branch i: adaptive
    average pool to s_i x s_i, 1x1 ConvBNReLU, bilinear back)."""

    def __init__(self, in_channels: int, channels: int, pool_scales=(1, 2, 3, 6)):
        super().__init__(nn.Sequential(AdaptivePool(s), ConvBNReLU(in_channels, channels, 1))
                         for s in pool_scales)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [resize(branch(x), x.shape[-2:]) for branch in self]


@MODELS.register_module()
class UPerHead(ClassifierTail):
    """``forward(levels)``: levels finest first (the model passes every neck level: ``reads_levels``) ->
    'b num_classes h_0 w_0'. ``in_channels``: one per level. init 'torch' or 'mmseg' (:mod:`heads.conv_init`)."""

    def __init__(self, in_channels, num_classes: int, channels: int = 512, pool_scales=(1, 2, 3, 6),
                 dropout: float = 0.1, init: str = 'torch'):
        super().__init__()
        in_channels = list(in_channels)
        if len(in_channels) < 1:
            raise ValueError("UPerHead needs in_channels: one entry per pyramid level, finest first")
        self.in_channels, self.num_classes = in_channels, num_classes
        self.psp_modules = PyramidPooling(in_channels[-1], channels, pool_scales)
        self.bottleneck = ConvBNReLU(in_channels[-1] + len(pool_scales) * channels, channels, 3)
        self.lateral_convs = nn.ModuleList(ConvBNReLU(c, channels, 1) for c in in_channels[:-1])
        self.fpn_convs = nn.ModuleList(ConvBNReLU(channels, channels, 3) for _ in in_channels[:-1])
        self.fpn_bottleneck = ConvBNReLU(len(in_channels) * channels, channels, 3)
        self.add_classifier(channels, num_classes, dropout, init)

    def forward(self, levels: list[torch.Tensor]) -> torch.Tensor:
        if len(levels) != len(self.in_channels):
            raise ValueError(f"UPerHead was built for {len(self.in_channels)} levels (in_channels "
                             f"{self.in_channels}), got {len(levels)}")
        top = levels[-1]
        laterals = [conv(x) for conv, x in zip(self.lateral_convs, levels)]
        laterals.append(self.bottleneck(torch.cat([top, *self.psp_modules(top)], dim=1)))
        for i in range(len(laterals) - 1, 0, -1):  # top-down
            laterals[i - 1] = laterals[i - 1] + resize(laterals[i], laterals[i - 1].shape[-2:])
        outs = [conv(x) for conv, x in zip(self.fpn_convs, laterals)] + [laterals[-1]]
        size = outs[0].shape[-2:]
        fused = self.fpn_bottleneck(torch.cat([resize(x, size) for x in outs], dim=1))
        return self.classify(fused)
