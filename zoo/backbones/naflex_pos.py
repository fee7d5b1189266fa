"""NaFlex position tables: one learned table resampled to each image's own grid (FlexiViT), on the patch tokens only.

:class:`GridPosEmbed` keeps a 2-D table ``weight`` '1 H W d' (timm's ``embeds.pos_embed`` layout); an image of grid
(h, w) reads the table resampled to (h, w) (``mode``: 'bicubic' or 'bilinear', antialiased when shrinking, as
``F.interpolate``), or, with ``ar_preserving``, resampled to the square (L, L), L = max(h, w), and cut to its top-left
h x w (the table keeps its aspect: a wide image reads the table's top rows). At the build grid the table is used as
it is. :class:`FactorizedPosEmbed` keeps a row table ``y`` '1 H d' and a column table ``x`` '1 W d', each resampled
linearly along its axis (same ``ar_preserving`` rule), the position of (i, j) being y[i] + x[j].
Both give ``forward(grid)`` '1 (h w) d' for a batch of one grid and :meth:`gather` 'b n d' for a
:class:`~.naflex_batch.NaFlexBatch` (each image's table at its patches' coordinates, 0 on padding; each distinct grid
resampled once).
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from ..core.resize import interpolate
from ..core.weight_decay import NoWeightDecay
from .naflex_batch import NaFlexBatch


class _PerGridTable(NoWeightDecay, nn.Module):
    """The per-image gathering of a table resampled per grid; subclasses give ``table(grid)`` '(h w) d'."""
    num_prefix = 0  # positions on the patch tokens only

    def table(self, grid) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, grid) -> torch.Tensor:
        """'1 (h w) d' for the grid (h, w)."""
        return self.table(tuple(grid))[None]

    def gather(self, batch: NaFlexBatch, dtype: torch.dtype) -> torch.Tensor:
        """'b n d': each image's table at its patches' (row, column), zero on the padding."""
        b, n = batch.valid.shape
        out = None
        by_grid: dict[tuple[int, int], list[int]] = {}
        for i, grid in enumerate(batch.grids):
            by_grid.setdefault(tuple(grid), []).append(i)
        for (h, w), rows in by_grid.items():
            table = self.table((h, w)).to(dtype)  # '(h w) d'
            index = torch.as_tensor(rows, device=batch.coords.device)
            coords = batch.coords[index]
            flat = (coords[..., 0] * w + coords[..., 1]).clamp(max=h * w - 1)  # padding reads row 0, masked below
            part = table[flat] * batch.valid[index, :, None].to(dtype)  # 'r n d'
            if out is None:
                out = table.new_zeros(b, n, table.shape[-1])
            out[index] = part
        return out


class GridPosEmbed(_PerGridTable):
    """A learned 2-D table '1 H W d' resampled to each image's grid (module docstring)."""
    no_weight_decay_names = ('weight',)

    def __init__(self, grid, dim: int, mode: str = 'bicubic', antialias: bool = True, align_corners: bool = False,
                 ar_preserving: bool = False):
        super().__init__()
        if mode not in ('bicubic', 'bilinear'):
            raise ValueError(f"a NaFlex table is resampled 'bicubic' or 'bilinear', got {mode!r}")
        self.grid = tuple(grid)
        self.mode, self.antialias, self.align_corners, self.ar_preserving = mode, antialias, align_corners, \
            ar_preserving
        self.weight = nn.Parameter(torch.empty(1, *self.grid, dim))
        nn.init.normal_(self.weight, std=0.02)

    def table(self, grid) -> torch.Tensor:
        h, w = grid
        if (h, w) == self.grid:
            return rearrange(self.weight, '1 h w d -> (h w) d')
        size = (max(h, w),) * 2 if self.ar_preserving else (h, w)
        resampled = interpolate(rearrange(self.weight.float(), '1 h w d -> 1 d h w'), size=size, mode=self.mode,
                                align_corners=self.align_corners, antialias=self.antialias)
        return rearrange(resampled[:, :, :h, :w], '1 d h w -> (h w) d').to(self.weight.dtype)

    def extra_repr(self) -> str:
        return f"grid={self.grid}, mode={self.mode!r}, ar_preserving={self.ar_preserving}"


class FactorizedPosEmbed(_PerGridTable):
    """Learned row and column tables '1 H d', '1 W d', each resampled linearly to the grid's side (module docstring)."""
    no_weight_decay_names = ('y', 'x')

    def __init__(self, grid, dim: int, ar_preserving: bool = False):
        super().__init__()
        self.grid = tuple(grid)
        self.ar_preserving = ar_preserving
        self.y = nn.Parameter(torch.empty(1, self.grid[0], dim))
        self.x = nn.Parameter(torch.empty(1, self.grid[1], dim))
        for table in (self.y, self.x):
            nn.init.normal_(table, std=0.02)

    @staticmethod
    def _resample(table: torch.Tensor, length: int) -> torch.Tensor:
        """'1 L d' -> 'length d', linear, corners not aligned."""
        if length == table.shape[1]:
            return table[0]
        line = nn.functional.interpolate(rearrange(table.float(), '1 l d -> 1 d l'), size=length, mode='linear',
                                         align_corners=False)
        return rearrange(line, '1 d l -> l d').to(table.dtype)

    def table(self, grid) -> torch.Tensor:
        h, w = grid
        len_y, len_x = (max(h, w),) * 2 if self.ar_preserving else (h, w)
        y, x = self._resample(self.y, len_y)[:h], self._resample(self.x, len_x)[:w]
        return rearrange(y[:, None] + x[None], 'h w d -> (h w) d')

    def extra_repr(self) -> str:
        return f"grid={self.grid}, ar_preserving={self.ar_preserving}"
