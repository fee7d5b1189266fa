"""Prefix tokens put before the patch tokens: CLS, distillation, registers."""
from __future__ import annotations

import torch
from torch import nn

from .weight_decay import NoWeightDecay


class PrefixTokens(NoWeightDecay, nn.Module):
    """Learned tokens, in the order CLS, distillation, registers: 'b n c -> b (p + n) c'.

    ``names`` labels each prefix position ('cls', 'dist', 'reg0', ...), which a DPT readout uses. The tokens take no
    weight decay.
    """
    no_weight_decay_names = ('cls', 'dist', 'registers')

    def __init__(self, dim: int, cls: bool = True, dist: bool = False, registers: int = 0):
        super().__init__()
        self.cls = nn.Parameter(torch.zeros(1, 1, dim)) if cls else None
        self.dist = nn.Parameter(torch.zeros(1, 1, dim)) if dist else None
        self.registers = nn.Parameter(torch.zeros(1, registers, dim)) if registers else None
        self.names = (['cls'] if cls else []) + (['dist'] if dist else []) + [f'reg{i}' for i in range(registers)]
        for token in (self.cls, self.dist):
            if token is not None:
                nn.init.normal_(token, std=1e-6 if token is self.cls else 0.02)
        if self.registers is not None:
            nn.init.normal_(self.registers, std=1e-6)

    def __len__(self) -> int:
        return len(self.names)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = [t.expand(x.shape[0], -1, -1) for t in (self.cls, self.dist, self.registers) if t is not None]
        return torch.cat(tokens + [x], dim=1) if tokens else x
