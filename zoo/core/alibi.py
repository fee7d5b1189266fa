"""2-D ALiBi (Press et al. 2022, "Train Short, Test Long", carried to patch grids) for :class:`zoo.core.Attention`'s
``pos_bias`` hook.

Head i adds ``-slope_i * dist(query patch, key patch)`` to its attention logits, with dist the Euclidean (default)
or Manhattan distance between the two patches' (row, column) indices, in patches. The slopes are the ALiBi
paper's geometric sequence: for n heads, a power of two, slope_i = 2 ** (-8 i / n), i = 1 .. n; otherwise the n'
= 2 ** floor(log2 n) slopes of n' heads followed by every other slope of 2 n' heads, as many as are missing.
Nothing is learned; any grid works. The ``num_prefix`` tokens before the grid (CLS, registers) are neither
penalised nor penalise: their rows and columns of the bias are 0.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .grid import Grid


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """'heads' slopes of the ALiBi paper (see the module docstring)."""
    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]
    if num_heads < 1:
        raise ValueError(f"ALiBi needs at least one head, got num_heads={num_heads}")
    base = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(base) + power_of_two(2 * base)[0::2][:num_heads - base]
    return torch.tensor(slopes, dtype=torch.float32)


def patch_distances(grid: Grid, metric: str = 'euclidean') -> torch.Tensor:
    """'(h w) (h w)' distances between the grid's patches, in patches (the grid's sides may be symbolic sizes while
    torch.export traces)."""
    h, w = grid
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                            indexing='ij')
    dy = ys.flatten()[:, None] - ys.flatten()[None, :]
    dx = xs.flatten()[:, None] - xs.flatten()[None, :]
    if metric == 'euclidean':
        return torch.sqrt(dy ** 2 + dx ** 2)
    if metric == 'manhattan':
        return dy.abs() + dx.abs()
    raise ValueError(f"ALiBi metric must be 'euclidean' or 'manhattan', got {metric!r}")


class AlibiBias(nn.Module):
    """``forward(grid)`` -> 'heads (p + h w) (p + h w)': -slope * distance between patches, 0 for prefix tokens."""

    def __init__(self, num_heads: int, num_prefix: int = 0, metric: str = 'euclidean'):
        super().__init__()
        if metric not in ('euclidean', 'manhattan'):
            raise ValueError(f"ALiBi metric must be 'euclidean' or 'manhattan', got {metric!r}")
        self.num_prefix, self.metric = num_prefix, metric
        self.register_buffer('slopes', alibi_slopes(num_heads), persistent=False)
        self._cached: tuple | None = None

    def forward(self, grid: Grid) -> torch.Tensor:
        if grid is None:
            raise ValueError("AlibiBias needs the token grid (h, w)")
        if torch.compiler.is_compiling():  # traced: the grid may be symbolic, the bias is computed in the graph
            return self.bias(grid)
        key = ((int(grid[0]), int(grid[1])), self.slopes.device, self.slopes.dtype)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        with torch.inference_mode(False):  # a constant: usable by autograd even when first made in inference mode
            bias = self.bias(key[0])
        self._cached = (key, bias)
        return bias

    def bias(self, grid: Grid) -> torch.Tensor:
        """The bias for ``grid``, computed (not cached): 'heads (p + h w) (p + h w)'."""
        dist = patch_distances(grid, self.metric).to(self.slopes.device)
        p = self.num_prefix  # prefix rows and columns: 0
        return F.pad(-self.slopes[:, None, None] * dist, (p, 0, p, 0)).to(self.slopes.dtype)

    def extra_repr(self) -> str:
        return f"num_heads={len(self.slopes)}, num_prefix={self.num_prefix}, metric={self.metric!r}"


def make_alibi(spec: dict | bool | None, num_heads: int, num_prefix: int) -> AlibiBias | None:
    """An :class:`AlibiBias` from a config value: True or ``dict(metric='euclidean' | 'manhattan')``; None for
    None/False."""
    if not spec:
        return None
    spec = {} if spec is True else dict(spec)
    unknown = sorted(set(spec) - {'metric'})
    if unknown:
        raise ValueError(f"alibi takes only 'metric' ('euclidean' or 'manhattan'), got {unknown}")
    return AlibiBias(num_heads, num_prefix, **spec)
