"""Adaptive average pooling whose bins are computed in the graph, for exports with a dynamic input size.

``nn.AdaptiveAvgPool2d`` to s x s pools bin i of a side n over [floor(i n / s), ceil((i + 1) n / s)). Traced with a
symbolic n, torch 2.14's ONNX translation gathers the bins at the traced size (indices out of range, or wrong
values, at other sizes). :class:`AdaptivePool` computes the same means as two pooling matrices built from n in the
graph, 'b c h w -> b c s s' = P_h x P_w^T (a rectangle's mean is the mean of its rows' means), whenever the size is
symbolic; in eager PyTorch it is ``adaptive_avg_pool2d`` itself (bit-identical to ``nn.AdaptiveAvgPool2d``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def pooling_matrix(n, s: int, like: torch.Tensor) -> torch.Tensor:
    """'s n': row i averages [floor(i n / s), ceil((i + 1) n / s)), in the dtype and on the device of ``like``."""
    i = torch.arange(s, device=like.device)[:, None]
    j = torch.arange(n, device=like.device)[None]
    start, end = torch.div(i * n, s, rounding_mode='floor'), torch.div((i + 1) * n + s - 1, s, rounding_mode='floor')
    inside = (j >= start) & (j < end)
    return inside.to(like.dtype) / (end - start).to(like.dtype)


class AdaptivePool(nn.Module):
    """'b c h w -> b c s s' adaptive average pooling (module docstring)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        if isinstance(h, int) and isinstance(w, int):
            return F.adaptive_avg_pool2d(x, self.size)
        rows, cols = pooling_matrix(h, self.size, x), pooling_matrix(w, self.size, x)
        return torch.einsum('ih,bchw,jw->bcij', rows, x, cols)  # b c h w -> b c s s

    def extra_repr(self) -> str:
        return f"size={self.size}"
