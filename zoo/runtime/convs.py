"""Convolution kernels chosen at run time: fp32 under CPU bf16 autocast where this CPU has no bf16 convolution
kernel, and shifted-GEMM weight gradients in CPU training (:mod:`zoo.runtime.conv_grad`).

Each convolution keeps its class: :func:`route_conv` sets an instance ``_conv_forward`` (``nn.Conv2d.forward`` and
every subclass call it, :class:`zoo.core.ConvBN` with its folded weights too) and, for an ``nn.ConvTranspose2d``,
an instance ``forward``. Both are plain objects, so that deep copies and pickles of the model carry them.
"""
from __future__ import annotations

from functools import lru_cache

import torch
from torch import nn
from torch.nn import functional as F

from .conv_grad import shift_gemm_conv


@lru_cache(maxsize=None)
def cpu_has_bf16_kernels() -> bool:
    """Whether oneDNN runs bf16 matmuls and convolutions on this CPU (AVX512 and newer). Without them torch
    falls back to reference kernels, far slower than fp32 (on an AVX2 EPYC: a bf16 2048^3 product at under
    1 GFLOP/s against about 100 in fp32; depthwise convolutions loop per group)."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def _in_cpu_autocast(x: torch.Tensor) -> bool:
    return x.device.type == 'cpu' and torch.is_autocast_enabled('cpu')


def _float(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.float()


class _ConvForward:
    """A convolution's ``_conv_forward``: in fp32 inside CPU autocast (result fp32) with ``fp32``, by shifted GEMMs
    where :func:`zoo.runtime.conv_grad.takes_shift_gemm` with ``gemm``, else its class's own."""

    def __init__(self, conv: nn.Conv2d, fp32: bool, gemm: bool):
        self.conv, self.fp32, self.gemm = conv, fp32, gemm

    def __call__(self, x, weight, bias):
        conv = self.conv
        if self.fp32 and _in_cpu_autocast(x):
            with torch.autocast('cpu', enabled=False):
                return type(conv)._conv_forward(conv, x.float(), weight.float(), _float(bias))
        out = shift_gemm_conv(conv, x, weight, bias) if self.gemm else None
        return type(conv)._conv_forward(conv, x, weight, bias) if out is None else out


class _Fp32TransposedForward:
    """An ``nn.ConvTranspose2d``'s ``forward`` in fp32 inside CPU autocast (result fp32), bf16 weights included
    (FSDP's ``param_dtype``)."""

    def __init__(self, conv: nn.ConvTranspose2d):
        self.conv = conv

    def __call__(self, x, output_size=None):
        conv = self.conv
        if not _in_cpu_autocast(x):
            return type(conv).forward(conv, x, output_size)
        with torch.autocast('cpu', enabled=False):
            padding = conv._output_padding(x, output_size, conv.stride, conv.padding, conv.kernel_size, 2,
                                           conv.dilation)
            return F.conv_transpose2d(x.float(), conv.weight.float(), _float(conv.bias), conv.stride, conv.padding,
                                      padding, conv.groups, conv.dilation)


def route_conv(conv: nn.Module, fp32: bool, gemm: bool) -> bool:
    """Route ``conv`` as the module doc says (``fp32``: only an ``nn.Conv2d`` / ``nn.ConvTranspose2d`` itself, as
    subclasses compute their own way; ``gemm``: any ``nn.Conv2d``); whether anything was routed."""
    exact = type(conv) in (nn.Conv2d, nn.ConvTranspose2d)
    if isinstance(conv, nn.Conv2d) and ((fp32 and exact) or gemm):
        conv._conv_forward = _ConvForward(conv, fp32 and exact, gemm)
        return True
    if isinstance(conv, nn.ConvTranspose2d) and fp32 and exact:
        conv.forward = _Fp32TransposedForward(conv)
        return True
    return False
