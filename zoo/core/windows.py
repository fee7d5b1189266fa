"""Shifted-window attention (Swin): the core :class:`Attention` on non-overlapping windows, the windows being a
batch dimension; the shift's region mask goes through Attention's ``mask`` and the relative position bias through
its ``pos_bias`` hook, evaluated on the window grid.

For tokens 'b (h w) c' on the map grid (h, w), as the reference (timm) does it:

1. the window (wh, ww) is the built one, shrunk on each side to the map where the map is no larger than the window;
   on such a side there is no shift (:func:`fit_window`);
2. cyclic shift of the map by -shift (``torch.roll``), then zero padding at the bottom and right to window multiples;
3. 'b (nh wh) (nw ww) c -> (b nh nw) (wh ww) c', attention within each window, with an additive mask of -100
   between tokens of different shift regions (the reference's value, not -inf: trained weights saw it);
4. windows merged back, the padding cropped, the shift undone.

mmseg pads before rolling instead; on maps that are window multiples the two agree.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from .attention import Attention
from .grid import Grid
from .rel_pos import cached_tensors

MASKED = -100.0  # the reference's additive mask between shift regions


def fit_window(grid: Grid, window: Grid, shift: Grid) -> tuple[Grid, Grid]:
    """(window, shift) used on a map of ``grid``: on a side where the map is no larger than the window, the window
    is the map's side and that side is not shifted."""
    fitted = tuple(min(int(g), w) for g, w in zip(grid, window))
    shifts = tuple(0 if g <= w else s for g, w, s in zip(grid, window, shift))
    return fitted, shifts


def _regions(size: int, window: int, shift: int) -> torch.Tensor:
    """Region label (0, 1, 2) of each row of a padded side: [0, n-window), [n-window, n-shift), [n-shift, n);
    one region when the side is not shifted."""
    index = torch.arange(size)
    if not shift:
        return torch.zeros(size, dtype=torch.long)
    return (index >= size - window).long() + (index >= size - shift).long()


@cached_tensors(maxsize=32)
def shift_mask(padded: Grid, window: Grid, shift: Grid) -> torch.Tensor:
    """Additive mask '(nh nw) (wh ww) (wh ww)': 0 within a shift region, :data:`MASKED` across regions."""
    rows = _regions(padded[0], window[0], shift[0])
    cols = _regions(padded[1], window[1], shift[1])
    labels = rows[:, None] * 3 + cols[None, :]  # 'hp wp'
    labels = rearrange(labels, '(nh wh) (nw ww) -> (nh nw) (wh ww)', wh=window[0], ww=window[1])
    return (labels[:, :, None] != labels[:, None, :]).float() * MASKED


class ShiftedWindowAttention(Attention):
    """:class:`Attention` within (shifted) windows of the token map; takes every Attention option.

    ``window`` (wh, ww) is the build window, ``shifted`` moves the windows by half a window (every other Swin block).
    ``forward(x, grid)``: x 'b (h w) c' on ``grid`` (h, w) -> 'b (h w) c' (and with ``return_attn`` the weights
    '(b windows) heads n n'). The window and shift mask come from the grid; no other mask is taken.
    """

    def __init__(self, dim: int, num_heads: int, window: Grid, shifted: bool = False, **kwargs):
        super().__init__(dim, num_heads, **kwargs)
        self.window = (int(window[0]), int(window[1]))
        self.shift = (self.window[0] // 2, self.window[1] // 2) if shifted else (0, 0)

    def forward(self, x: torch.Tensor, grid: Grid | None = None, mask=None, num_queries=None,
                return_attn: bool = False):
        if grid is None:
            raise ValueError("ShiftedWindowAttention needs the token grid (h, w)")
        if mask is not None or num_queries is not None:
            raise ValueError("ShiftedWindowAttention makes its own mask and takes no mask or num_queries")
        (h, w), b = grid, x.shape[0]
        window, shift = fit_window(grid, self.window, self.shift)
        shifted = any(shift)
        fmap = rearrange(x, 'b (h w) c -> b h w c', h=h, w=w)
        if shifted:
            fmap = torch.roll(fmap, (-shift[0], -shift[1]), dims=(1, 2))
        pad_h, pad_w = -h % window[0], -w % window[1]
        if pad_h or pad_w:
            fmap = F.pad(fmap, (0, 0, 0, pad_w, 0, pad_h))
        padded = (h + pad_h, w + pad_w)
        windows = rearrange(fmap, 'b (nh wh) (nw ww) c -> (b nh nw) (wh ww) c', wh=window[0], ww=window[1])
        region_mask = None
        if shifted:  # 'nW n n' -> '(b nW) 1 n n'
            region_mask = shift_mask(padded, window, shift).to(device=x.device, dtype=x.dtype)
            region_mask = region_mask[None, :, None].expand(b, -1, -1, -1, -1).flatten(0, 1)
        out = super().forward(windows, grid=window, mask=region_mask, return_attn=return_attn)
        out, attn = out if return_attn else (out, None)
        fmap = rearrange(out, '(b nh nw) (wh ww) c -> b (nh wh) (nw ww) c', b=b, nh=padded[0] // window[0],
                         wh=window[0], ww=window[1])[:, :h, :w]
        if shifted:
            fmap = torch.roll(fmap, shift, dims=(1, 2))
        out = rearrange(fmap, 'b h w c -> b (h w) c')
        return (out, attn) if return_attn else out

    def extra_repr(self) -> str:
        return f"window={self.window}, shift={self.shift}"
