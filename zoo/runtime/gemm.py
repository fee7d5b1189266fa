"""fp32 matrix products on CPU through oneDNN where it is the faster library on this machine.

torch's CPU ``F.linear`` / ``mm`` in fp32 run Intel MKL's sgemm, which takes a slower code path on AMD CPUs
with AVX-512: a 1024 x 768 x 3072 product (one thread) runs at ~100 GFLOP/s through MKL and ~220 through oneDNN
(``torch.ops.mkldnn._linear_pointwise``, the kernel torch's own compiler uses on CPU) on an AVX-512 EPYC. On an
AVX2-only EPYC the two measured 0.8-1.2x of each other (ViT-S and ViT-B shapes), on an Intel Xeon (AVX-512) 0.98x.
So oneDNN is used on AMD CPUs with AVX-512 (``vendor_id`` in /proc/cpuinfo, torch's CPU capability): a fixed rule
rather than a timing, so that every process on a machine makes the same choice and runs stay reproducible (a
resume continues with the same kernels). ``ZOO_CPU_GEMM=onednn`` or ``=torch`` forces it; :func:`onednn_speedup`
measures the ratio for reports.

- :func:`linear` is ``F.linear`` with that choice (its backward too: both gradients are products);
- :func:`mm` is ``a @ b`` for 2-D operands, for hand-written backward passes;
- :func:`route_linear` makes one ``nn.Linear`` compute through :func:`linear` (its class unchanged: an instance
  ``forward``), as :func:`zoo.runtime.apply_kernel_policy` does for a model's plain Linears; zoo's own Linears
  (:class:`zoo.core.Linear` and its subclasses) call :func:`linear` themselves.

Nothing here acts until :func:`enable` (``apply_kernel_policy`` calls it): until then :func:`linear` and
:func:`mm` are ``F.linear`` and ``a @ b``, whatever the CPU.

The oneDNN path runs only for fp32 CPU tensors outside autocast (bf16 autocast already runs oneDNN), outside
``torch.compile`` (inductor picks its own kernels) and for plain tensors (not FSDP's DTensors). The results
equal MKL's up to fp32 summation order (relative differences ~1e-7).
"""
from __future__ import annotations

import os
import time
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

CHOICES = ('auto', 'onednn', 'torch')


def _pointwise(a: torch.Tensor, b_t: torch.Tensor, bias=None) -> torch.Tensor:
    """'m k, n k -> m n' (a @ b_t.T + bias) by oneDNN."""
    return torch.ops.mkldnn._linear_pointwise(a, b_t, bias, 'none', [], '')


def best_seconds(fn, repeats: int = 3) -> float:
    """The least of ``repeats`` timings of ``fn()`` after one warm-up call."""
    fn()
    best = float('inf')
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@lru_cache(maxsize=None)
def has_onednn() -> bool:
    """Whether this torch has oneDNN's fp32 linear for this CPU."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, '_linear_pointwise')):
        return False
    try:
        _pointwise(torch.ones(2, 3), torch.ones(4, 3))
    except RuntimeError:  # a build whose oneDNN lacks the op for this CPU
        return False
    return True


@lru_cache(maxsize=None)
def onednn_speedup() -> float:
    """MKL's time / oneDNN's time for a 1024 x 768 x 768 fp32 product on this machine (0 without oneDNN)."""
    if not has_onednn():
        return 0.0
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(1024, 768, generator=generator), torch.randn(768, 768, generator=generator)
    return best_seconds(lambda: F.linear(x, w)) / best_seconds(lambda: _pointwise(x, w))


@lru_cache(maxsize=None)
def cpu_vendor() -> str:
    """This CPU's ``vendor_id`` (GenuineIntel, AuthenticAMD, ...; '' where /proc/cpuinfo does not say)."""
    try:
        with open('/proc/cpuinfo') as info:
            return next((line.split(':', 1)[1].strip() for line in info if line.startswith('vendor_id')), '')
    except OSError:
        return ''


@lru_cache(maxsize=None)
def _avx512() -> bool:
    return torch.backends.cpu.get_cpu_capability().startswith('AVX512')


def uses_onednn() -> bool:
    """Whether fp32 CPU products go through oneDNN here (``ZOO_CPU_GEMM``: auto (default: on AMD CPUs with
    AVX-512), onednn, torch)."""
    choice = os.environ.get('ZOO_CPU_GEMM', 'auto').lower()
    if choice not in CHOICES:
        raise ValueError(f"ZOO_CPU_GEMM must be one of {CHOICES}, got {choice!r}")
    if choice == 'torch':
        return False
    return choice == 'onednn' or (cpu_vendor() == 'AuthenticAMD' and _avx512() and has_onednn())


_enabled = False  # set by enable(): apply_kernel_policy turns the choice on


def enable(on: bool = True) -> None:
    """Let :func:`linear` and :func:`mm` take oneDNN where :func:`uses_onednn` says so (off: always torch's)."""
    global _enabled
    _enabled = on


def enabled() -> bool:
    """Whether :func:`enable` turned the choice on in this process."""
    return _enabled


def _takes_onednn(*tensors: torch.Tensor) -> bool:
    # traced code first takes torch's kernels (torch.compile, torch.export): asked before the machine's choice, which
    # reads /proc/cpuinfo, a graph break at every product under torch.compile (DPT ViT-B's compiled forward ran at
    # 0.47x eager on an H200). Then the machine's choice: where it is torch's (Intel CPUs, AVX2 EPYCs) nothing per
    # tensor is looked at, a few microseconds less per product (LeViT makes 60 of them per forward)
    return (_enabled and not torch.compiler.is_compiling() and uses_onednn() and not torch.is_autocast_enabled('cpu')
            and all(type(t) in (torch.Tensor, nn.Parameter) and t.device.type == 'cpu'
                    and t.dtype == torch.float32 for t in tensors))


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """'m k, k n -> m n' (``a @ b``), by oneDNN where it is faster (see the module doc)."""
    if a.numel() and b.numel() and _takes_onednn(a, b):
        return _pointwise(a.contiguous(), b.t().contiguous())
    return a @ b


class _OneDNNLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _pointwise(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = mm(grad, weight) if ctx.needs_input_grad[0] else None
        grad_w = mm(grad.t(), x) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` ('... k, n k -> ... n'), by oneDNN where it is faster (see the module doc)."""
    if not (x.numel() and _takes_onednn(x, weight, *([] if bias is None else [bias]))):
        return F.linear(x, weight, bias)
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = (_OneDNNLinear.apply(rows, weight, bias) if torch.is_grad_enabled()
           and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
           else _pointwise(rows, weight, bias))
    return out.reshape(*x.shape[:-1], weight.shape[0])


class _RoutedForward:
    """The ``forward`` of one ``nn.Linear`` through :func:`linear` (an instance attribute set by
    :func:`route_linear`; a plain object, so that deep copies and pickles of the model carry it)."""

    def __init__(self, module: nn.Linear):
        self.module = module

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.module.weight, self.module.bias)


def route_linear(module: nn.Linear) -> None:
    """``module`` (an ``nn.Linear`` itself, not a subclass with its own forward) computes through :func:`linear`;
    its class, parameters and state dict stay as they are."""
    module.forward = _RoutedForward(module)
