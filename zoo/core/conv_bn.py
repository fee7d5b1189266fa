"""Convolution followed by BatchNorm, folded into one convolution when the BN statistics are frozen."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ConvBN(nn.Module):
    """'b c h w -> b d h' w'': conv (no bias) then BatchNorm2d (``conv``, ``norm``).

    In eval (running statistics in use) it runs as one conv whose weight and bias absorb the BN:
    w' = w * g / sqrt(var + eps), b' = beta - mean * g / sqrt(var + eps); same values, one pass fewer.
    ``depthwise=True`` makes it a per-channel conv (groups = channels), as CvT's q/k/v projections.
    """

    def __init__(self, in_chans: int, out_chans: int | None = None, kernel_size: int = 3, stride: int = 1,
                 padding: int | None = None, depthwise: bool = False):
        super().__init__()
        out_chans = out_chans or in_chans
        padding = kernel_size // 2 if padding is None else padding
        self.conv = nn.Conv2d(in_chans, out_chans, kernel_size, stride, padding, bias=False,
                              groups=in_chans if depthwise else 1)
        self.norm = nn.BatchNorm2d(out_chans)

    def folded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The conv weight and bias equivalent to conv -> BN with the running statistics."""
        bn = self.norm
        gain = bn.running_var.add(bn.eps).rsqrt()
        if bn.weight is not None:
            gain = gain * bn.weight
        bias = -bn.running_mean * gain
        if bn.bias is not None:
            bias = bias + bn.bias
        return self.conv.weight * gain[:, None, None, None], bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or self.norm.running_var is None:
            return self.norm(self.conv(x))
        weight, bias = self.folded()
        conv = self.conv
        return F.conv2d(x, weight.to(x.dtype), bias.to(x.dtype), conv.stride, conv.padding, conv.dilation,
                        conv.groups)
