"""Weight-standardised convolution (Qiao et al. 2019) and TensorFlow's 'SAME' padding, as BiT ResNets use them.

``StdConv2d`` normalises each output filter to zero mean and unit variance over its (in, kh, kw) weights before
convolving: w' = (w - mean) / sqrt(var + eps), the biased variance. With ``padding='same'`` the input is padded as
TensorFlow does: out = ceil(in / stride), the total padding max((out - 1) * stride + (k - 1) * dilation + 1 - in, 0)
split with the odd pixel at the end (bottom/right). That padding depends on the input size only when stride > 1 and
the kernel is wider than one pixel; otherwise it is the symmetric (k - 1) * dilation / 2 (0 for a 1x1 kernel) and is
left to the convolution.

The size arithmetic is integer floor division, with no ceil of a true division and no max where none is needed.
Traced with a symbolic size (torch.export), ``math.ceil(in / s)`` and ``max(.., 0)`` became CeilToInt / Max terms
that sympy cannot simplify, nested once per strided layer: a BiT ResNet's stage sizes grew to thousands of
characters and the ViT's reshapes of its (h w) tokens sat in sympy for minutes. As floor divisions they reduce to a
linear expression of the size variable wherever the input is a multiple of the strides.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow 'SAME' padding (before, after) of one side of ``size`` pixels (an int or a symbolic size).

    total = max((ceil(size / s) - 1) s + reach - size, 0), reach = (k - 1) dilation + 1, written as
    reach - s + overhang, overhang = s ceil(size / s) - size = (-size) mod s in [0, s): never negative when
    reach >= s, and never positive when reach == 1, so neither case needs the max (module docstring)."""
    reach = (kernel - 1) * dilation + 1
    if reach == 1:
        return 0, 0
    overhang = stride * ((size + stride - 1) // stride) - size
    total = reach - stride + overhang
    if reach < stride:  # 1 < reach < stride: no BiT layer has this; the max is then needed
        total = torch.sym_max(total, 0)
    return total // 2, total - total // 2


def pad_same(x: torch.Tensor, kernel, stride, dilation=1, value: float = 0.0) -> torch.Tensor:
    """'b c H W' padded for a 'SAME' window of ``kernel`` at ``stride``: the output is ceil(H / s) x ceil(W / s)."""
    (kh, kw), (sh, sw), (dh, dw) = _pair(kernel), _pair(stride), _pair(dilation)
    top, bottom = same_padding(x.shape[-2], kh, sh, dh)
    left, right = same_padding(x.shape[-1], kw, sw, dw)
    if top or bottom or left or right:
        x = F.pad(x, (left, right, top, bottom), value=value)
    return x


def _static_same(kernel: int, stride: int, dilation: int) -> bool:
    """Whether 'SAME' padding is one fixed symmetric padding for every input size (0 for a 1x1 kernel)."""
    return kernel == 1 or (stride == 1 and (dilation * (kernel - 1)) % 2 == 0)


class StdConv2d(nn.Conv2d):
    """Conv2d on weight-standardised filters (``eps`` added to the variance; BiT uses 1e-8 in ViT-hybrids).

    padding: 'same' (TensorFlow's, see the module docstring) or an int (PyTorch's symmetric padding).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: str | int = 'same', dilation: int = 1, groups: int = 1, bias: bool = False,
                 eps: float = 1e-6):
        if isinstance(padding, str) and padding != 'same':
            raise ValueError(f"StdConv2d padding must be 'same' or an int, got {padding!r}")
        self.dynamic_same = padding == 'same' and not _static_same(kernel_size, stride, dilation)
        if padding == 'same':
            padding = 0 if self.dynamic_same else dilation * (kernel_size - 1) // 2
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
        self.eps = eps

    def standardized_weight(self) -> torch.Tensor:
        """'o i kh kw' with every output filter at zero mean and unit (biased) variance."""
        w = self.weight.flatten(1)
        var, mean = torch.var_mean(w, dim=1, correction=0, keepdim=True)
        return ((w - mean) * torch.rsqrt(var + self.eps)).view_as(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dynamic_same:
            x = pad_same(x, self.kernel_size, self.stride, self.dilation)
        return F.conv2d(x, self.standardized_weight(), self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class MaxPool2dSame(nn.Module):
    """Max pooling with TensorFlow 'SAME' padding (padded with -inf, so padding never wins the max)."""

    def __init__(self, kernel_size: int = 3, stride: int = 2):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = pad_same(x, self.kernel_size, self.stride, value=float('-inf'))
        return F.max_pool2d(x, self.kernel_size, self.stride)
