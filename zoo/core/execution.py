"""How a built model runs, without changing what it computes: switches applied to every part that has them.

- :func:`set_grad_checkpointing`: transformer blocks recompute their activations in backward instead of
  keeping them (less training memory, about a third more time); blocks with batch norm are left alone, as
  recomputing them would update the running statistics twice;
- :func:`set_fused_attention`: SDPA (memory linear in tokens) or the explicit softmax(q k^T) v path (memory
  quadratic in tokens; what attention maps are read from).

Which CPU kernels run is not here: :func:`zoo.runtime.apply_kernel_policy`.
"""
from __future__ import annotations

import torch
from torch import nn
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
