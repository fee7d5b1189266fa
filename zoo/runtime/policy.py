"""The kernel policy: one step that makes a built model compute with the CPU kernels this machine runs fastest.

Building a model never depends on the machine: every module keeps the class its builder gave it.
:func:`apply_kernel_policy` is what the runner, the benchmark and the predictor call (and log) after building;
a user calls it or not. It routes each module to its kernels without changing its class, parameters, state dict
or outputs (up to fp32 summation order):

- plain ``nn.Linear`` layers through :func:`zoo.runtime.gemm.linear` (oneDNN's fp32 GEMM on AMD CPUs with
  AVX-512, ``ZOO_CPU_GEMM``); zoo's own Linears consult the same choice once it is enabled;
- ``nn.Conv2d`` / ``nn.ConvTranspose2d`` in fp32 under CPU bf16 autocast where this CPU has no bf16 convolution
  kernel (:func:`zoo.runtime.convs.cpu_has_bf16_kernels`);
- in the parts a model names in ``gemm_weight_grad_parts`` (the DPT neck and head: 3x3 convolutions on large
  maps), CPU training weight gradients of stride-1 convolutions by shifted GEMMs where that is faster
  (:mod:`zoo.runtime.conv_grad`, ``ZOO_CONV_WEIGHT_GRAD``; a resumed run takes its checkpoint's choice).

Applying it twice changes nothing more. Compiled code and exported programs (``torch.compile``, ``torch.export``,
ONNX) take torch's own kernels whatever the policy.
"""
from __future__ import annotations

import os

from torch import nn

from . import conv_grad, gemm
from .convs import cpu_has_bf16_kernels, route_conv

PARTS_ATTRIBUTE = 'gemm_weight_grad_parts'


def _gemm_part_modules(model: nn.Module) -> set[int]:
    parts = [getattr(model, name, None) for name in getattr(model, PARTS_ATTRIBUTE, ())]
    return {id(m) for part in parts if part is not None for m in part.modules()}


def apply_kernel_policy(model: nn.Module, fp32_convs: bool | None = None) -> str:
    """Route ``model``'s layers to this machine's kernels (see the module doc); returns the choice in one line,
    for the log. ``fp32_convs`` None: where this CPU has no bf16 convolution kernel."""
    gemm.enable()
    fp32 = not cpu_has_bf16_kernels() if fp32_convs is None else fp32_convs
    gemm_parts = _gemm_part_modules(model)
    linears = convs = shifted = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            gemm.route_linear(module)
            linears += 1
        elif route_conv(module, fp32, id(module) in gemm_parts):
            convs += 1
            shifted += id(module) in gemm_parts
    return describe(fp32, (linears, convs, shifted))


def describe(fp32: bool | None = None, counts: tuple[int, int, int] | None = None) -> str:
    """The policy's choice in words: which kernels and why; with ``counts`` (Linears, convolutions, convolutions
    in GEMM weight-gradient parts) how many layers it routed."""
    fp32 = not cpu_has_bf16_kernels() if fp32 is None else fp32
    forced = os.environ.get('ZOO_CONV_WEIGHT_GRAD', 'auto').lower()
    weight_grads = (f"ZOO_CONV_WEIGHT_GRAD={forced}" if forced != 'auto' else
                    f"the resumed run's {conv_grad.decided()}" if conv_grad.decided() else
                    "timed at the first CPU training step")
    routed = '' if counts is None else (f"; routed {counts[0]} nn.Linear and {counts[1]} convolutions, {counts[2]} "
                                         f"of them in parts that may take shifted-GEMM weight gradients")
    return (f"kernel policy: fp32 GEMMs by {'oneDNN' if gemm.uses_onednn() else 'torch (MKL)'} "
            f"(CPU {gemm.cpu_vendor() or 'unknown'}, ZOO_CPU_GEMM={os.environ.get('ZOO_CPU_GEMM', 'auto')}); "
            f"convolutions fp32 under CPU bf16 autocast: {'yes' if fp32 else 'no'} (bf16 kernels: "
            f"{'yes' if cpu_has_bf16_kernels() else 'no'}); conv weight gradients by oneDNN or shifted GEMMs: "
            f"{weight_grads}{routed}")
