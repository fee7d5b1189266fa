"""Attention pooling: a learned query reads the tokens through the core's Attention (one query, all keys)."""
from __future__ import annotations

import torch
from torch import nn

from .attention import Attention
from .qkv import SeparateQKV


class AttentionPool(nn.Module):
    """'b n d -> b d': a learned query token attends over itself and the ``n`` tokens (multi-head, ``num_heads``;
    CaiT's class attention, with the query a parameter) and its projected output is the pooled feature."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.query = nn.Parameter(torch.zeros(1, 1, dim))
        self.attn = Attention(dim, num_heads, qkv=SeparateQKV(dim, num_queries=1))
        nn.init.trunc_normal_(self.query, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.query.expand(tokens.shape[0], -1, -1), tokens], dim=1)  # b (1 + n) d
        return self.attn(x)[:, 0]
