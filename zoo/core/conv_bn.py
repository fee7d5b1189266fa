"""Convolution followed by BatchNorm, folded into one convolution when the BN statistics are frozen."""
from __future__ import annotations

import torch
from torch import nn

from .layers import activate, grad_free


def bn_affine(bn: nn.modules.batchnorm._BatchNorm) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel (scale, shift) of ``bn`` with its running statistics: bn(y) = y * scale + shift."""
    scale = bn.running_var.add(bn.eps).rsqrt()
    if bn.weight is not None:
        scale = scale * bn.weight
    shift = -bn.running_mean * scale
    if bn.bias is not None:
        shift = shift + bn.bias
    return scale, shift


class ConvBN(nn.Module):
    """'b c h w -> b d h' w'': conv (no bias), optional ``gate``, BatchNorm2d, optional activation.

    In eval (running statistics in use) and without a gate, conv and BN run as one conv whose weight and
    bias absorb the BN: w' = w * g / sqrt(var + eps), b' = beta - mean * g / sqrt(var + eps); same values,
    one pass fewer. ``depthwise=True`` makes it a per-channel conv (groups = channels), as CvT's q/k/v
    projections and MBConv's kxk conv; ``gate`` is a module applied between conv and BN (the squeeze-excite
    of timm's "early" MBConv) whose ``weights(y)`` are per-channel multipliers 'b c 1 1'; in eval it is
    merged with the BN into one multiply-add. Keys ``conv``, ``gate``, ``norm``.
    """

    def __init__(self, in_chans: int, out_chans: int | None = None, kernel_size: int = 3, stride: int = 1,
                 padding: int | None = None, depthwise: bool = False, act_layer=None, gate: nn.Module | None = None):
        super().__init__()
        out_chans = out_chans or in_chans
        padding = kernel_size // 2 if padding is None else padding
        self.conv = nn.Conv2d(in_chans, out_chans, kernel_size, stride, padding, bias=False,
                              groups=in_chans if depthwise else 1)
        self.gate = gate
        self.norm = nn.BatchNorm2d(out_chans)
        self.act = act_layer() if act_layer else nn.Identity()

    def affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel (scale, shift) of the BN with its running statistics: bn(y) = y * scale + shift."""
        return bn_affine(self.norm)

    def folded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The conv weight and bias equivalent to conv -> BN with the running statistics."""
        scale, shift = self.affine()
        return self.conv.weight * scale[:, None, None, None], shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or self.norm.running_var is None:
            x = self.conv(x)
            return activate(self.act, self.norm(x if self.gate is None else self.gate(x)))
        if self.gate is not None:  # gate and BN as one in-place multiply-add: y * (g * scale) + shift
            y = self.conv(x)
            scale, shift = (t.to(y.dtype)[:, None, None] for t in self.affine())
            gain = self.gate.weights(y) * scale
            y = y.mul_(gain).add_(shift) if grad_free(y) else y * gain + shift
            return activate(self.act, y)
        weight, bias = self.folded()
        return activate(self.act, self.conv._conv_forward(x, weight.to(x.dtype), bias.to(x.dtype)))
