"""conv -> BatchNorm -> ReLU, the unit UperNet's and FCN's heads are built of (mmcv's ``ConvModule`` with BN)."""
from __future__ import annotations

from collections import OrderedDict

from torch import nn


class ConvBNReLU(nn.Sequential):
    """'b i h w -> b o h w': a k x k conv without bias (padding k // 2 x dilation: same size), BatchNorm, ReLU.
    Children ``conv``, ``bn``, ``act``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 1, dilation: int = 1):
        super().__init__(OrderedDict(
            conv=nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2 * dilation,
                           dilation=dilation, bias=False),
            bn=nn.BatchNorm2d(out_channels), act=nn.ReLU(inplace=True)))
