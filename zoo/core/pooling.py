"""Attention pooling: a learned query reads the tokens through the core's Attention (:class:`AttentionPool`: one
query, itself and the tokens the keys; :class:`ProbePool`: SigLIP's MAP head, the tokens alone the keys, then an
MLP)."""
from __future__ import annotations

import torch
from torch import nn

from .attention import Attention
from .layers import Mlp
from .qkv import ProbeQKV, SeparateQKV


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


class ProbePool(nn.Module):
    """'b n d -> b d': multihead attention-pooling (MAP; SigLIP, timm's ``AttentionPoolLatent``): a learned probe
    ``latent`` asks the ``n`` tokens (:class:`zoo.core.qkv.ProbeQKV`: the probe is not among the keys), the output
    projected, then a residual MLP on the normed result: y = a + mlp(norm(a)). ``mask`` (bool 'b 1 1 n', True = a
    key; NaFlex's padding is not) goes to the attention."""

    def __init__(self, dim: int, num_heads: int, hidden_dim: int, norm_layer=nn.LayerNorm, act_layer=nn.GELU):
        super().__init__()
        self.latent = nn.Parameter(torch.zeros(1, 1, dim))
        self.attn = Attention(dim, num_heads, qkv=ProbeQKV(dim, num_queries=1))
        self.norm = norm_layer(dim)
        self.mlp = Mlp(dim, hidden_dim, act_layer=act_layer)
        nn.init.trunc_normal_(self.latent, std=dim ** -0.5)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attn(torch.cat([self.latent.expand(tokens.shape[0], -1, -1), tokens], dim=1), mask=mask)[:, 0]
        return x + self.mlp(self.norm(x))
