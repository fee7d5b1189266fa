"""How a built model runs, without changing what it computes: switches applied to every part that has them.

- :func:`set_grad_checkpointing`: transformer blocks recompute their activations in backward instead of
  keeping them (less training memory, about a third more time); blocks with batch norm are left alone, as
  recomputing them would update the running statistics twice;
- :func:`set_fused_attention`: SDPA (memory linear in tokens) or the explicit softmax(q k^T) v path (memory
  quadratic in tokens; what attention maps are read from);
- :func:`keep_convs_fp32_on_cpu_autocast`: convolutions run in fp32 inside CPU bf16 autocast when this CPU
  has no oneDNN bf16 kernels (:func:`cpu_has_bf16_kernels`; without them torch falls back to a slow im2col
  loop, per group for depthwise convolutions).
"""
from __future__ import annotations

from functools import lru_cache

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from .attention import Attention


class Checkpointable(nn.Module):
    """A module whose ``forward`` is recomputed in backward when ``grad_checkpointing`` is set (training only).

    Subclasses implement ``_forward``; keyword arguments pass through.
    """
    grad_checkpointing = False

    def forward(self, *args, **kwargs):
        if self.grad_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(self._forward, *args, use_reentrant=False, **kwargs)
        return self._forward(*args, **kwargs)

    def _forward(self, *args, **kwargs):
        raise NotImplementedError


def set_grad_checkpointing(model: nn.Module, enable: bool = True) -> nn.Module:
    """Activation checkpointing on every :class:`Checkpointable` part of ``model``; returns ``model``."""
    for module in model.modules():
        if isinstance(module, Checkpointable):
            module.grad_checkpointing = enable
    return model


def set_fused_attention(model: nn.Module, enable: bool = True) -> nn.Module:
    """SDPA (``True``) or the explicit attention path (``False``) in every attention layer; returns ``model``."""
    for module in model.modules():
        if isinstance(module, Attention):
            module.fused = enable
    return model


@lru_cache(maxsize=None)
def cpu_has_bf16_kernels() -> bool:
    """Whether oneDNN runs bf16 matmuls and convolutions on this CPU (AVX512 and newer). Without them torch
    falls back to reference kernels, far slower than fp32 (on an AVX2 EPYC: a bf16 2048^3 product at under
    1 GFLOP/s against about 100 in fp32)."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def _in_cpu_autocast(x: torch.Tensor) -> bool:
    return x.device.type == 'cpu' and torch.is_autocast_enabled('cpu')


class Fp32OnCPUAutocastConv2d(nn.Conv2d):
    """``nn.Conv2d`` that runs in fp32 inside CPU autocast (result fp32); also for the folded weights
    :class:`zoo.core.ConvBN` passes to ``_conv_forward``."""

    def _conv_forward(self, x, weight, bias):
        if not _in_cpu_autocast(x):
            return super()._conv_forward(x, weight, bias)
        with torch.autocast('cpu', enabled=False):
            return super()._conv_forward(x.float(), weight.float(), None if bias is None else bias.float())


class Fp32OnCPUAutocastConvTranspose2d(nn.ConvTranspose2d):
    """``nn.ConvTranspose2d`` that runs in fp32 inside CPU autocast (result fp32), bf16 weights included (FSDP's
    ``param_dtype``)."""

    def forward(self, x, output_size=None):
        if not _in_cpu_autocast(x):
            return super().forward(x, output_size)
        with torch.autocast('cpu', enabled=False):
            padding = self._output_padding(x, output_size, self.stride, self.padding, self.kernel_size, 2,
                                           self.dilation)
            return F.conv_transpose2d(x.float(), self.weight.float(), None if self.bias is None else self.bias.float(),
                                      self.stride, self.padding, padding, self.groups, self.dilation)


_FP32_ON_CPU_AUTOCAST = {nn.Conv2d: Fp32OnCPUAutocastConv2d, nn.ConvTranspose2d: Fp32OnCPUAutocastConvTranspose2d}


def keep_convs_fp32_on_cpu_autocast(model: nn.Module, force: bool = False) -> nn.Module:
    """Makes every ``nn.Conv2d`` / ``nn.ConvTranspose2d`` of ``model`` run in fp32 under CPU autocast when this
    CPU has no oneDNN bf16 kernels (or always with ``force``); same parameters, same state dict; no change
    outside CPU autocast. Returns ``model``."""
    if force or not cpu_has_bf16_kernels():
        for module in model.modules():
            module.__class__ = _FP32_ON_CPU_AUTOCAST.get(type(module), type(module))
    return model
