"""Convolution weight gradients as k*k matrix products over shifted views (stride-1 convolutions on CPU).

oneDNN's weight-gradient kernel for channels-last activations runs far below the matmul rate on some CPUs (on
an AVX-512 EPYC: about 10 GFLOP/s against 70 for a 2048^3 product, one thread; the forward and the input
gradient of the same convolution run at 70). It was most of the DPT ViT-B training step: the neck's and head's
3x3 convolutions at 1/8-1/2 resolution hold ~40% of the model's FLOPs; on an AVX2-only EPYC 9-16 GFLOP/s against
45-49 for the GEMMs below (256 channels, 64-128 pixels square, one thread). On other CPUs (a later AVX-512 EPYC)
the same kernel runs at 135-200 GFLOP/s, faster than these GEMMs: which path is faster is measured once per
process at its thread count (:func:`shift_gemm_speedup`, a second or two) and the GEMMs are used only where they win by
``MIN_SPEEDUP`` or more. A timing can still land on either side of the margin (1.6-2.2x at two threads on an AVX2
EPYC), and the two paths sum in different orders, so three things keep runs reproducible: with
``torch.use_deterministic_algorithms(True)`` (``tools/train.py --deterministic``) nothing is timed and torch's own
kernel is used; a resumed run takes the choice its checkpoint recorded (:func:`pin`, by ``RngStateHook``); and
``ZOO_CONV_WEIGHT_GRAD=gemm`` or ``=onednn`` forces it. For a stride-1, undilated, ungrouped convolution the weight
gradient is one product per kernel offset (dy, dx)::

    dW[:, :, dy, dx] = sum over output pixels p of  g[p] (o) x_pad[p + (dy, dx)] (c)

With channels-last memory, pad x to 'n (h+2p+1) (w+2p) c' and g with zeros to the same grid: flattened to rows
'(n h w) c', the shifted input of offset (dy, dx) is the contiguous slice starting at dy*(w+2p)+dx, so each
offset is one GEMM on views, no im2col. Positions in the padding get a zero gradient, so they add nothing;
the extra bottom row keeps every slice inside the buffer.

:func:`shift_gemm_conv` is a convolution's ``_conv_forward`` that takes this path in training on CPU for
channels-last inputs (:func:`takes_shift_gemm`); :mod:`zoo.runtime.convs` routes the convolutions of the parts a
model names to it (:func:`zoo.runtime.apply_kernel_policy`). The forward and the input gradient stay oneDNN's.
"""
from __future__ import annotations

import os
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from .gemm import best_seconds


def conv_weight_grad(x: torch.Tensor, grad: torch.Tensor, kernel: tuple[int, int], padding: tuple[int, int]):
    """dL/dW of a stride-1 convolution, 'o c kh kw', from its input x 'n c h w' and output gradient
    'n o h_out w_out' (any memory layout; channels-last avoids two copies)."""
    (kh, kw), (ph, pw) = kernel, padding
    n, c, h, w = x.shape
    h_out, w_out, width = grad.shape[-2], grad.shape[-1], w + 2 * pw
    rows = h + 2 * ph + 1
    xf = F.pad(x.permute(0, 2, 3, 1), (0, 0, pw, pw, ph, ph + 1)).reshape(-1, c)  # (n rows width) c
    gf = F.pad(grad.permute(0, 2, 3, 1), (0, 0, 0, width - w_out, 0, rows - h_out)).reshape(-1, grad.shape[1])
    length = gf.shape[0] - (kh - 1) * width - (kw - 1)  # every nonzero gradient row lies before this
    gf = gf[:length]
    out = x.new_empty(grad.shape[1], kh, kw, c)
    for dy in range(kh):
        for dx in range(kw):
            start = dy * width + dx
            torch.mm(gf.t(), xf[start:start + length], out=out[:, dy, dx])
    return out.permute(0, 3, 1, 2)


class _ShiftGemmConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, padding):
        ctx.save_for_backward(x, weight)
        ctx.padding, ctx.has_bias = padding, bias is not None
        return F.conv2d(x, weight, bias, 1, padding)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.aten.convolution_backward(
                grad, x, weight, None, [1, 1], list(ctx.padding), [1, 1], False, [0, 0], 1, [True, False, False])[0]
        if ctx.needs_input_grad[1]:
            grad_w = conv_weight_grad(x, grad, weight.shape[-2:], ctx.padding).contiguous(
                memory_format=_format_of(weight))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum((0, 2, 3))
        return grad_x, grad_w, grad_b, None


def _format_of(t: torch.Tensor):
    return torch.channels_last if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(
        memory_format=torch.channels_last) else torch.contiguous_format


MIN_SPEEDUP = 1.5  # this probe on an AVX-512 EPYC: 0.5-0.7 (1 and 2 threads), under AVX2 there 2.3-3.2
CHOICES = ('auto', 'gemm', 'onednn')


@lru_cache(maxsize=None)
def shift_gemm_speedup() -> float:
    """oneDNN's time / the shifted GEMMs' time for the weight gradient of a 3x3 convolution, 128 -> 128 channels
    on a channels-last 1 x 128 x 128 x 128 map (a DPT neck's finest map at 512: oneDNN's slow path grows with the
    map, so a small probe hides it: under AVX2 on an EPYC, one thread, 1.4x at 256 x 48 x 48 but 3.2x here, and
    the whole training step's weight gradients run at the large maps' rate), on this machine at the current thread
    count (0.2-0.9 s)."""
    generator = torch.Generator().manual_seed(0)
    x, grad = (torch.randn(1, 128, 128, 128, generator=generator).contiguous(memory_format=torch.channels_last)
               for _ in range(2))
    weight = torch.randn(128, 128, 3, 3, generator=generator)
    onednn = best_seconds(lambda: torch.ops.aten.convolution_backward(
        grad, x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False]), repeats=2)
    return onednn / best_seconds(lambda: conv_weight_grad(x, grad, (3, 3), (1, 1)), repeats=2)


_pinned: str | None = None  # set by pin(): a resumed run's recorded choice
_used: str | None = None  # the last choice() answer, for a checkpoint to record


def choice() -> str:
    """'gemm' or 'onednn': ``ZOO_CONV_WEIGHT_GRAD`` when it names one, else the choice :func:`pin` set, else
    'onednn' under deterministic algorithms (no timing), else the measurement (:func:`shift_gemm_speedup`)."""
    global _used
    forced = os.environ.get('ZOO_CONV_WEIGHT_GRAD', 'auto').lower()
    if forced not in CHOICES:
        raise ValueError(f"ZOO_CONV_WEIGHT_GRAD must be one of {CHOICES}, got {forced!r}")
    if forced != 'auto':
        _used = forced
    elif _pinned or torch.are_deterministic_algorithms_enabled():
        _used = _pinned or 'onednn'
    else:  # the timing runs once per process (cached)
        _used = 'gemm' if shift_gemm_speedup() >= MIN_SPEEDUP else 'onednn'
    return _used


def decided() -> str | None:
    """The choice this process last used (None before its first CPU training convolution), for a checkpoint to
    record."""
    return _used


def pin(value: str | None) -> None:
    """Use ``value`` ('gemm' or 'onednn') from now on in this process, as a resumed run must to continue bit for
    bit; None goes back to measuring. ``ZOO_CONV_WEIGHT_GRAD`` still overrides it."""
    global _pinned
    if value not in (None, 'gemm', 'onednn'):
        raise ValueError(f"a convolution weight-gradient choice is 'gemm' or 'onednn', got {value!r}")
    _pinned = value


def shift_gemm_conv(conv: nn.Conv2d, x: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor | None:
    """``conv``'s convolution with the shifted-GEMM weight gradient where :func:`takes_shift_gemm`, else None."""
    return _ShiftGemmConv.apply(x, weight, bias, conv.padding) if takes_shift_gemm(conv, x, weight) else None


def takes_shift_gemm(conv: nn.Conv2d, x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Training on CPU, fp32 outside autocast, stride 1, no dilation or groups, zero padding, channels-last x,
    and the GEMMs chosen for this process (:func:`choice`); never in traced code (torch.compile, torch.export take
    torch's kernels: :func:`choice`'s timing would break the graph at every convolution)."""
    return (x.device.type == 'cpu' and not torch.compiler.is_compiling() and torch.is_grad_enabled()
            and weight.requires_grad
            and x.dtype == weight.dtype == torch.float32 and not torch.is_autocast_enabled('cpu')
            and conv.stride == (1, 1) and conv.dilation == (1, 1) and conv.groups == 1
            and conv.padding_mode == 'zeros' and isinstance(conv.padding, tuple) and x.dim() == 4
            and x.is_contiguous(memory_format=torch.channels_last) and choice() == 'gemm')
