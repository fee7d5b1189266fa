"""LeViT's attention bias: per head a learned value for each offset magnitude (|dy|, |dx|) between a query and a key,
for :class:`zoo.core.Attention`'s ``pos_bias`` hook, defined for any grid.

The table 'heads (h w)' holds the bias of the offsets |dy| in [0, h), |dx| in [0, w) of the build grid (h, w), as
timm's ``attention_biases``. For another grid (h', w') it is resampled as a 'heads h w' image to (h', w') (bicubic,
antialiased when shrinking: the rule timm applies to LeViT/TinyViT checkpoints of another size), so any input size
works (timm fixes the table at build time). With ``query_stride`` s the queries are the keys' grid points
(s i, s j) (:class:`zoo.core.qkv.StridedQueryQKV`): the bias is 'heads (h'' w'') (h w)', h'' = ceil(h / s).
In inference the gathered bias of the last grid is kept (no per-call gathering).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .grid import Grid
from .pos_embed import square_grid
from .rel_pos import _RelativeBias, cached_tensors
from .weight_decay import NoWeightDecay
from .windows import is_static


@cached_tensors(maxsize=64)
def abs_offset_index(grid: Grid, stride: int) -> torch.Tensor:
    """'(h'' w'') (h w)' flat index |dy| * w + |dx| of each (strided query, key) pair on the key grid (h, w)."""
    h, w = grid
    ky, kx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
    qy, qx = torch.meshgrid(torch.arange(0, h, stride), torch.arange(0, w, stride), indexing='ij')
    dy = (qy.reshape(-1, 1) - ky.reshape(1, -1)).abs()
    dx = (qx.reshape(-1, 1) - kx.reshape(1, -1)).abs()
    return dy * w + dx


def resize_abs_offset_table(table: torch.Tensor, old: Grid, new: Grid) -> torch.Tensor:
    """'heads (h w)' for offsets on ``old`` -> 'heads (h' w')' on ``new`` (bicubic in float32; identity if equal).

    A traced (symbolic) ``new`` is always resampled, equal or not (resampling to the same size is exact): comparing
    it with ``old`` would fix the trace to the answer at the traced size (e.g. a 256-side trace of LeViT, whose
    last stage then has its build grid 4x4, would run at that grid only)."""
    old, new = tuple(old), tuple(new)
    if old == new if is_static(*new) else False:
        return table
    image = table.float().reshape(1, table.shape[0], *old)
    image = F.interpolate(image, size=new, mode='bicubic', align_corners=False, antialias=True)
    return image.flatten(2)[0].to(table.dtype)


class AbsOffsetBias(NoWeightDecay, _RelativeBias):
    """Learned ``table`` 'heads (h w)' for the build ``grid`` (h, w) of the keys; no weight decay on it.

    ``forward(grid)`` -> 'heads m n' for the key grid, m = n without ``query_stride``, else the strided queries.
    """
    no_weight_decay_names = ('table',)
    checkpoint_key = 'table'  # the parameter load_pretrained resizes with resample_checkpoint

    def __init__(self, grid: Grid, num_heads: int, query_stride: int = 1):
        super().__init__()
        self.grid = (int(grid[0]), int(grid[1]))
        self.query_stride = query_stride
        self.table = nn.Parameter(torch.zeros(num_heads, self.grid[0] * self.grid[1]))

    def expand(self, grid: Grid) -> torch.Tensor:
        table = resize_abs_offset_table(self.table, self.grid, grid)
        return table[:, abs_offset_index(grid, self.query_stride).to(table.device)]

    def resample_checkpoint(self, table: torch.Tensor) -> torch.Tensor:
        """A checkpoint's table of another (square) build grid resampled to this module's grid."""
        if table.ndim != 2 or table.shape[0] != self.table.shape[0]:
            raise ValueError(f"an offset table is 'heads (h w)' with {self.table.shape[0]} heads, got shape "
                             f"{tuple(table.shape)}")
        return resize_abs_offset_table(table, square_grid(table.shape[1]), self.grid)

    def extra_repr(self) -> str:
        return f"grid={self.grid}, num_heads={self.table.shape[0]}, query_stride={self.query_stride}"
