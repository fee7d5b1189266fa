"""q/k/v projections, the pluggable front of :class:`zoo.core.attention.Attention`.

Each takes tokens 'b n c' (and optionally the grid and a query count m) and returns
q 'b m c', k 'b n c', v 'b n c'.
"""
from __future__ import annotations

import torch
from torch import nn


class FusedQKV(nn.Linear):
    """q, k and v from one Linear (c -> 3c), laid out [q | k | v] as in timm's ``attn.qkv``."""

    def __init__(self, dim: int, bias: bool = True):
        super().__init__(dim, 3 * dim, bias=bias)

    def forward(self, x: torch.Tensor, grid=None, num_queries: int | None = None):
        q, k, v = super().forward(x).chunk(3, dim=-1)
        return (q if num_queries is None else q[:, :num_queries]), k, v


class SeparateQKV(nn.Module):
    """q, k and v from three Linears; with ``num_queries`` only the first m tokens are projected to q."""

    def __init__(self, dim: int, bias: bool = True):
        super().__init__()
        self.q = nn.Linear(dim, dim, bias=bias)
        self.k = nn.Linear(dim, dim, bias=bias)
        self.v = nn.Linear(dim, dim, bias=bias)

    def forward(self, x: torch.Tensor, grid=None, num_queries: int | None = None):
        queries = x if num_queries is None else x[:, :num_queries]
        return self.q(queries), self.k(x), self.v(x)
