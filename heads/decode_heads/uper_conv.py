"""The parts UperNet's and FCN's heads are built of: conv -> BatchNorm -> ReLU (mmcv's ``ConvModule`` with BN), and
the classifier tail of mmseg's decode heads (dropout, then a 1x1 conv to the classes)."""
from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from zoo.core import Dropout

from ..conv_init import check_init, classifier_init, conv_module_init


class ConvBNReLU(nn.Sequential):
    """'b i h w -> b o h w': a k x k conv without bias (padding k // 2 x dilation: same size), BatchNorm, ReLU.
    Children ``conv``, ``bn``, ``act``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 1, dilation: int = 1):
        super().__init__(OrderedDict(
            conv=nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2 * dilation,
                           dilation=dilation, bias=False),
            bn=nn.BatchNorm2d(out_channels), act=nn.ReLU(inplace=True)))


class ClassifierTail(nn.Module):
    """A head ending as mmseg's decode heads do: ``dropout`` then ``conv_seg`` (1x1 conv to the classes), built by
    :meth:`add_classifier` after the head's own convs (init 'mmseg': every ConvBNReLU's conv Kaiming, the classifier
    normal std 0.01; 'torch': as built); :meth:`classify` 'b channels h w -> b num_classes h w'. Such heads read
    every neck level (``reads_levels``)."""
    reads_levels = True

    def add_classifier(self, channels: int, num_classes: int, dropout: float, init: str) -> None:
        self.dropout = Dropout(dropout)
        self.conv_seg = nn.Conv2d(channels, num_classes, 1)
        if check_init(init) == 'mmseg':
            conv_module_init(*self.modules())
            classifier_init(self.conv_seg)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_seg(self.dropout(x))
