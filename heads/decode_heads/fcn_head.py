"""mmseg's FCN head, UperNet's auxiliary head: one pyramid level through ConvBNReLUs and a 1x1 classifier.

'b c h w' (level ``in_index`` of the levels, finest first) -> ``num_convs`` k x k ConvBNReLU (the first c -> channels,
dilation ``dilation``) [-> the input concatenated, k x k ConvBNReLU (``concat_input``)] -> dropout -> 1x1 conv to
classes: 'b num_classes h w'.
"""
from __future__ import annotations

import torch
from torch import nn

from ..registry import MODELS
from .uper_conv import ClassifierTail, ConvBNReLU


@MODELS.register_module()
class FCNHead(ClassifierTail):
    """``forward(levels)`` reads ``levels[in_index]`` (levels finest first; the model passes every neck level:
    ``reads_levels``). ``in_index`` 2 is stride 16 of a 4..32 pyramid, as mmseg's UperNet configs."""

    def __init__(self, in_channels: int | list[int], num_classes: int, channels: int = 256, num_convs: int = 1,
                 kernel_size: int = 3, dilation: int = 1, concat_input: bool = False, in_index: int = 2,
                 dropout: float = 0.1, init: str = 'torch'):
        super().__init__()
        if isinstance(in_channels, (list, tuple)):  # every level's width (finest first): read level in_index's
            in_channels = list(in_channels)[in_index]
        if num_convs < 0 or (num_convs == 0 and in_channels != channels):
            raise ValueError(f"FCNHead num_convs must be >= 0, and 0 only when in_channels == channels "
                             f"(got num_convs={num_convs}, in_channels={in_channels}, channels={channels})")
        self.in_index, self.num_classes = in_index, num_classes
        self.convs = nn.Sequential(*(ConvBNReLU(in_channels if i == 0 else channels, channels, kernel_size, dilation)
                                     for i in range(num_convs)))
        self.conv_cat = ConvBNReLU(in_channels + channels, channels, kernel_size) if concat_input else None
        self.add_classifier(channels, num_classes, dropout, init)

    def forward(self, levels: list[torch.Tensor]) -> torch.Tensor:
        if not -len(levels) <= self.in_index < len(levels):
            raise ValueError(f"FCNHead in_index {self.in_index} is out of range for {len(levels)} levels")
        x = levels[self.in_index]
        out = self.convs(x)
        if self.conv_cat is not None:
            out = self.conv_cat(torch.cat([x, out], dim=1))
        return self.classify(out)
