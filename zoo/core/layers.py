"""Small parts of a transformer block: MLP, DropPath, LayerScale."""
from __future__ import annotations

import torch
from torch import nn


class Mlp(nn.Module):
    """fc1 -> act -> dropout -> fc2 -> dropout on the last axis."""

    def __init__(self, dim: int, hidden_dim: int, out_dim: int | None = None, act_layer=nn.GELU,
                 drop: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop) if drop else nn.Identity()
        self.fc2 = nn.Linear(hidden_dim, out_dim or dim)
        self.drop2 = nn.Dropout(drop) if drop else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: in training, zero a sample's residual branch with probability p, scale the rest by 1/(1-p)."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"drop path probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerScale(nn.Module):
    """Per-channel learned scale of a residual branch (CaiT), ``gamma`` initialised to ``init_values``."""

    def __init__(self, dim: int, init_values: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_values)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma
