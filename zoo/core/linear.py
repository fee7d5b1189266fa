"""``Linear``: the base of zoo's Linears that have their own forward (the fused q/k/v projection, LoRA's)."""
from __future__ import annotations

import torch
from torch import nn

from ..runtime.gemm import linear


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) whose linear map is :func:`zoo.runtime.gemm.linear`: torch's
    ``F.linear``, or oneDNN's fp32 GEMM once the kernel policy chose it (:func:`zoo.runtime.apply_kernel_policy`).
    Subclasses reach it through ``super().forward``, so that a LoRA adapter (:mod:`zoo.lora`) acts inside it; one
    whose bias is made of other parameters says so in :meth:`linear_bias`."""

    def linear_bias(self) -> torch.Tensor | None:
        """The bias of the linear map: ``bias``."""
        return self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.linear_bias())
