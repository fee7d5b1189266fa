"""Relative position biases for :class:`zoo.core.Attention`'s ``pos_bias`` hook, defined for any grid.

A bias module maps the token grid (h, w) to an additive attention bias 'heads (h w) (h w)': for the
query at (y, x) and the key at (y', x') it reads an offset table 'heads (2h-1) (2w-1)' at
(y - y' + h - 1, x - x' + w - 1).

- :class:`RelPosBias` learns the table for the grid it is built for and resizes it, differentiably, to
  the grid of each input, with the geometric-progression resampling of BEiT/timm (the offsets near zero
  keep their spacing, the far ones are stretched; linear interpolation, clamped at the edges): a model
  built for 224 and run at 384 computes what timm builds for 384 with its checkpoint filter.
- :class:`RelPosMlp` computes the table with a small MLP of log-spaced offsets, so it is exact at every grid:
  timm's 'cr' mode (``mode='cr'``), or Swin V2's continuous position bias (``mode='swin'``: offsets scaled to
  +-8 over the window, or over the ``pretrained_window`` the weights were trained with, log2-spaced, and the
  table squashed to 16 * sigmoid).
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .grid import Grid, TokenGrid
from .layers import Mlp
from .weight_decay import NoWeightDecay


def cached_tensors(maxsize: int):
    """``functools.lru_cache`` for functions returning tensors, computed outside ``torch.inference_mode`` even
    when first called inside it: a cached inference tensor could not take part in autograd later.

    While torch.export / torch.compile traces, the function is called without the cache: its arguments may be
    symbolic sizes (a dynamic height and width), which the graph must compute from, not a value baked in."""
    def wrap(fn):
        @functools.lru_cache(maxsize=maxsize)
        def cached(*args):
            with torch.inference_mode(False):
                return fn(*args)

        @functools.wraps(fn)
        def call(*args):  # a forward's TokenGrid is kept as the plain tuple it equals, not with its tables
            return fn(*args) if torch.compiler.is_compiling() else cached(*(_plain(a) for a in args))
        return call
    return wrap


def _plain(arg):
    return tuple(arg) if isinstance(arg, TokenGrid) else arg


BISECTION_STEPS = 19  # halvings of [1.01, 1.5] until it is under 1e-6 wide: 0.49 / 2**19 < 1e-6 <= 0.49 / 2**18


def _stretch_ratio(src: int, dst) -> torch.Tensor:
    """q with 1 + q + ... + q**(src//2 - 1) ~= dst // 2, by bisection on [1.01, 1.5] (BEiT's rule), as a float64
    tensor: a fixed number of halvings in tensor arithmetic, so that a traced graph computes it for a symbolic
    ``dst`` (the grid of a dynamic input size)."""
    target = torch.zeros((), dtype=torch.float64) + dst // 2
    low, high = torch.tensor(1.01, dtype=torch.float64), torch.tensor(1.5, dtype=torch.float64)
    for _ in range(BISECTION_STEPS):
        q = (low + high) / 2.0
        above = (1.0 - q ** (src // 2)) / (1.0 - q) > target
        high, low = torch.where(above, q, high), torch.where(above, low, q)
    return q


@cached_tensors(maxsize=64)
def offset_resize_matrix(src: int, dst) -> torch.Tensor:
    """'dst src' linear-interpolation weights taking ``src`` offsets (2n-1 of them) to ``dst`` offsets.

    The source offsets sit at 0, +-1, +-(1 + q), +-(1 + q + q**2), ...; the targets at the integers
    -(dst//2) .. dst//2. Targets beyond the outermost source offset take its value. ``dst == src`` is the identity
    (the table as learned). Tensor arithmetic only (no
    Python loop over ``dst``), so ``dst`` may be a symbolic size while torch.export traces.
    """
    q = _stretch_ratio(src, dst)
    powers = q ** torch.arange(1, src // 2 + 1, dtype=torch.float64)  # q, q**2, ...
    steps = torch.cumsum(torch.cat([torch.ones(1, dtype=torch.float64), powers[:-1]]), 0)[:src // 2]
    source = torch.cat([-steps.flip(0), torch.zeros(1, dtype=torch.float64), steps])
    target = torch.arange(-(dst // 2), dst // 2 + 1, dtype=torch.float64)
    right = (target[:, None] > source[None, :]).sum(1).clamp(max=src - 1)  # the first source offset >= target
    left = (right - 1).clamp(min=0)
    to_left = (target - source[left]).clamp(min=0)    # distance to the left source offset
    to_right = (source[right] - target).clamp(min=0)
    total = to_left + to_right
    on_point = total == 0
    left_weight = torch.where(on_point, 0.0, to_right / total.where(~on_point, 1.0))
    right_weight = torch.where(on_point, 1.0, to_left / total.where(~on_point, 1.0))
    same = torch.zeros((), dtype=torch.long) + dst == src  # the identity, decided in the graph when dst is symbolic
    index = torch.arange(dst).clamp(max=src - 1)
    left, right = torch.where(same, index, left), torch.where(same, index, right)
    left_weight, right_weight = torch.where(same, 0.0, left_weight), torch.where(same, 1.0, right_weight)
    weights = (F.one_hot(left, src) * left_weight[:, None] + F.one_hot(right, src) * right_weight[:, None])
    return weights.float()


@functools.lru_cache(maxsize=16)
def _shrink_rows(src: int) -> list:
    """:func:`shrink_matrices` as nested lists, computed on real tensors even while a trace runs."""
    with unset_fake_temporarily(), disable_proxy_modes_tracing(), torch.inference_mode(False):
        stack = torch.zeros(src // 2 + 1, src, src)
        for k in range(src // 2 + 1):
            stack[k, :2 * k + 1] = offset_resize_matrix(src, 2 * k + 1)
    return stack.tolist()


def shrink_matrices(src: int) -> torch.Tensor:
    """'k src src': for each k in 0 .. src // 2, :func:`offset_resize_matrix` (src, 2k+1) in its first 2k+1 rows
    (zeros below): the resampling to every odd table no larger than ``src``; a constant of a traced graph."""
    return torch.tensor(_shrink_rows(src))


def _resize_matrix(src: int, dst) -> torch.Tensor:
    """:func:`offset_resize_matrix`; for a symbolic odd ``dst`` known to be at most ``src`` (a Swin window fitted to
    a dynamic map: 2 min(side, window) - 1), read from :func:`shrink_matrices` by index in the graph instead of
    tracing the bisection there (Swin-T's exported graph held 19 steps per axis and block)."""
    if not isinstance(dst, int) and statically_known_true(dst <= src) and statically_known_true(dst % 2 == 1):
        return shrink_matrices(src)[dst // 2, :dst]
    return offset_resize_matrix(src, dst)


def resize_offset_table(table: torch.Tensor, size: Grid) -> torch.Tensor:
    """'heads H W -> heads h w' offset table resampled to ``size`` = (2h-1, 2w-1) (identity if equal: returned as it
    is, or, for a symbolic size (torch.export, dynamic torch.compile), through the identity matrices in the graph).
    A concrete size is compared here, also while torch.compile traces: the resampling graph (19 bisection steps per
    axis and block) would otherwise be traced into every block and inductor's lowering of it takes many minutes."""
    concrete = all(isinstance(s, int) for s in (*table.shape[1:], *size))
    if concrete and tuple(table.shape[1:]) == tuple(size):
        return table
    rows = _resize_matrix(table.shape[1], size[0]).to(table)
    cols = _resize_matrix(table.shape[2], size[1]).to(table)
    return rows @ table @ cols.T


@cached_tensors(maxsize=32)
def relative_offsets(grid: Grid) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column indices '(h w) (h w)' of each query-key offset in a 'heads (2h-1) (2w-1)' table."""
    h, w = grid
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
    ys, xs = ys.flatten(), xs.flatten()
    return ys[:, None] - ys[None, :] + h - 1, xs[:, None] - xs[None, :] + w - 1


class _RelativeBias(nn.Module):
    """Subclasses give ``offset_table(grid)`` 'heads (2h-1) (2w-1)'; forward expands it per token pair.

    Without autograd (inference) the expanded bias of the last grid is kept until a parameter changes; not while
    torch.export / torch.compile traces.
    """

    def __init__(self):
        super().__init__()
        self._cached: tuple | None = None

    def offset_table(self, grid: Grid) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, grid: Grid) -> torch.Tensor:
        if grid is None:
            raise ValueError(f"{type(self).__name__} needs the token grid (h, w)")
        if torch.compiler.is_compiling():  # traced: the grid may be symbolic, the bias is computed in the graph
            return self.expand(grid)
        grid = (int(grid[0]), int(grid[1]))
        params = list(self.parameters())
        versions = tuple((p.device, p.dtype, p._version, p.data_ptr()) for p in params)
        key = (grid, self.training, torch.is_grad_enabled(), torch.is_inference_mode_enabled(), versions)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        bias = self.expand(grid)
        grad_needed = torch.is_grad_enabled() and any(p.requires_grad for p in params)
        self._cached = None if grad_needed or self.training else (key, bias)
        return bias

    def expand(self, grid: Grid) -> torch.Tensor:
        """The bias 'heads (h w) (h w)' read from ``offset_table(grid)`` for every query-key pair."""
        rows, cols = relative_offsets(grid)
        table = self.offset_table(grid)
        return table[:, rows.to(table.device), cols.to(table.device)]


class RelPosBias(NoWeightDecay, _RelativeBias):
    """Learned offset ``table`` 'heads (2h-1) (2w-1)' for the build ``window`` (h, w), resized per input grid; no
    weight decay on it."""
    no_weight_decay_names = ('table',)

    def __init__(self, window: Grid, num_heads: int):
        super().__init__()
        self.window = tuple(window)
        self.table = nn.Parameter(torch.zeros(num_heads, 2 * self.window[0] - 1, 2 * self.window[1] - 1))
        nn.init.trunc_normal_(self.table, std=0.02)

    def offset_table(self, grid: Grid) -> torch.Tensor:
        return resize_offset_table(self.table, (2 * grid[0] - 1, 2 * grid[1] - 1))

    checkpoint_key = 'table'  # the parameter load_pretrained resizes with resample_checkpoint

    def resample_checkpoint(self, table: torch.Tensor) -> torch.Tensor:
        """A checkpoint's table (another build window) resized to this module's window."""
        if table.ndim != 3 or table.shape[0] != self.table.shape[0] or min(table.shape) < 1:
            raise ValueError(f"an offset table is 'heads (2h-1) (2w-1)' with {self.table.shape[0]} heads, got shape "
                             f"{tuple(table.shape)}")
        return resize_offset_table(table, tuple(self.table.shape[1:]))

    def extra_repr(self) -> str:
        return f"window={self.window}, num_heads={self.table.shape[0]}"


def offsets(grid: Grid) -> torch.Tensor:
    """'(2h-1) (2w-1) 2' float offsets (dy, dx), each from -(n-1) to n-1."""
    dy = torch.arange(-(grid[0] - 1), grid[0], dtype=torch.float32)
    dx = torch.arange(-(grid[1] - 1), grid[1], dtype=torch.float32)
    return torch.stack(torch.meshgrid(dy, dx, indexing='ij'), dim=-1)


def log_offsets(grid: Grid) -> torch.Tensor:
    """'(2h-1) (2w-1) 2' offsets (dy, dx) mapped by sign(d) * log(1 + |d|) (timm's 'cr' coordinates)."""
    coords = offsets(grid)
    return coords.sign() * coords.abs().log1p()


def swin_log_offsets(grid: Grid, pretrained_window: Grid | None = None) -> torch.Tensor:
    """'(2h-1) (2w-1) 2' offsets (dy, dx) of Swin V2: d / (n - 1) * 8 with n the window side (the
    ``pretrained_window`` side when given), then sign(d) * log2(1 + |d|) / 3."""
    coords = offsets(grid)
    span = pretrained_window or grid
    coords = coords / torch.tensor([max(span[0] - 1, 1), max(span[1] - 1, 1)], dtype=torch.float32) * 8.0
    return coords.sign() * torch.log2(coords.abs() + 1.0) / 3.0


class RelPosMlp(NoWeightDecay, _RelativeBias):
    """Offset table from an MLP (2 -> hidden -> heads, ReLU, dropout after the hidden layer) of log offsets; no
    weight decay on the MLP (as timm).

    ``mode='cr'``: timm's 'cr' coordinates (:func:`log_offsets`), output layer with bias. ``mode='swin'``: Swin V2's
    (:func:`swin_log_offsets`, relative to ``pretrained_window`` when given), output layer without bias, the table
    mapped to 16 * sigmoid(table).
    """
    no_weight_decay_names = ('*',)

    def __init__(self, num_heads: int, hidden_dim: int = 512, drop: float = 0.125, mode: str = 'cr',
                 pretrained_window: Grid | None = None):
        super().__init__()
        if mode not in ('cr', 'swin'):
            raise ValueError(f"RelPosMlp mode must be 'cr' or 'swin', got {mode!r}")
        self.mode = mode
        self.pretrained_window = tuple(pretrained_window) if pretrained_window else None
        self.mlp = Mlp(2, hidden_dim, out_dim=num_heads, act_layer=nn.ReLU, drop=(drop, 0.0))
        if mode == 'swin':
            self.mlp.fc2.register_parameter('bias', None)  # Swin V2's output layer has no bias

    def offset_table(self, grid: Grid) -> torch.Tensor:
        if self.mode == 'swin':
            coords = swin_log_offsets(grid, self.pretrained_window).to(self.mlp.fc1.weight)
            return 16.0 * torch.sigmoid(self.mlp(coords).permute(2, 0, 1))
        coords = log_offsets(grid).to(self.mlp.fc1.weight)
        return self.mlp(coords).permute(2, 0, 1)  # '(2h-1) (2w-1) heads -> heads (2h-1) (2w-1)'
