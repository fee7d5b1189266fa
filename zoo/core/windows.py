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

With ``pad_first`` (the dense codebases' way: mmseg, the official Swin segmentation and detection code, transformers'
``SwinBackbone``) the window is never shrunk nor the shift dropped, and the map is zero-padded to window multiples
*before* the roll, so padding tokens roll in at the top/left; the region mask is the same function of the padded
map. On maps that are window multiples larger than the window the two agree; elsewhere weights trained one way give
other outputs the other way (a 512 x 512 ADE20K input with window 7 pads every stage).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from .attention import Attention
from .grid import Grid
from .rel_pos import cached_tensors

MASKED = -100.0  # the reference's additive mask between shift regions


def fit_window(grid: Grid, window: Grid, shift: Grid, pad_first: bool = False) -> tuple[Grid, Grid]:
    """(window, shift) used on a map of ``grid``: on a side where the map is no larger than the window, the window
    is the map's side and that side is not shifted (with ``pad_first``: always the built ones). Plain ints for int
    sides; for symbolic sides (a dynamic size while torch.export traces) the same choice as ``torch.sym_min`` /
    ``sym_max`` expressions, so the exported graph makes it for each input (ONNX Min / Max) instead of fixing the
    traced one."""
    if pad_first:
        return window, shift
    if is_static(*grid):
        return (tuple(min(g, w) for g, w in zip(grid, window)),
                tuple(0 if g <= w else s for g, w, s in zip(grid, window, shift)))
    fitted = tuple(torch.sym_min(g, w) for g, w in zip(grid, window))
    shifts = tuple(s * torch.sym_min(torch.sym_max(g - w, 0), 1) for g, w, s in zip(grid, window, shift))
    return fitted, shifts


def padded_grid(grid: Grid, window: Grid) -> Grid:
    """``grid`` rounded up to window multiples (ceil division of non-negative sizes: the ONNX translation of
    Python's floor division of a negative symbolic size truncates instead, torch 2.14)."""
    return tuple((g + n - 1) // n * n for g, n in zip(grid, window))


def is_static(*sizes) -> bool:
    """Whether every size is a plain int (eager), not a symbolic size being traced."""
    return all(isinstance(s, int) for s in sizes)


def _window_rows_cols(padded: Grid, window: Grid) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded-map row 'nh 1 wh 1' and column '1 nw 1 ww' of each window token ('(nh wh) (nw ww) -> nh nw wh ww'
    by index arithmetic, so that the window may be a symbolic size)."""
    (ph, pw), (wh, ww) = padded, window
    rows = torch.arange(ph // wh)[:, None, None, None] * wh + torch.arange(wh)[None, None, :, None]
    cols = torch.arange(pw // ww)[None, :, None, None] * ww + torch.arange(ww)[None, None, None, :]
    return rows, cols


def _regions(size, window, shift) -> torch.Tensor:
    """Region label (0, 1, 2) of each row of a padded side: [0, n-window), [n-window, n-shift), [n-shift, n);
    one region (all 0) when the side is not shifted (``shift`` 0)."""
    index = torch.arange(size)
    if is_static(shift) and not shift:
        return torch.zeros(size, dtype=torch.long)
    labels = (index >= size - window).long() + (index >= size - shift).long()
    return labels if is_static(shift) else labels * torch.sym_min(shift, 1)  # a symbolic shift may be 0


@cached_tensors(maxsize=32)
def shift_mask(padded: Grid, window: Grid, shift: Grid) -> torch.Tensor:
    """Additive mask '(nh nw) (wh ww) (wh ww)': 0 within a shift region, :data:`MASKED` across regions."""
    rows, cols = _window_rows_cols(padded, window)
    labels = _regions(padded[0], window[0], shift[0])[rows] * 3 + _regions(padded[1], window[1], shift[1])[cols]
    labels = labels.reshape(-1, window[0] * window[1])  # 'nh nw wh ww -> (nh nw) (wh ww)'
    return (labels[:, :, None] != labels[:, None, :]).float() * MASKED


@cached_tensors(maxsize=16)
def batch_shift_mask(padded: Grid, window: Grid, shift: Grid, batch: int, device: torch.device,
                     dtype: torch.dtype) -> torch.Tensor:
    """:func:`shift_mask` for a batch of images, '(b nh nw) 1 n n' (every shifted block of a stage shares it)."""
    mask = shift_mask(padded, window, shift).to(device=device, dtype=dtype)
    return mask[None, :, None].expand(batch, -1, -1, -1, -1).flatten(0, 1)


@cached_tensors(maxsize=64)
def window_order(grid: Grid, window: Grid, shift: Grid, pad_first: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Token gathers that do 1. to 3. and 4. at once (one copy each way instead of roll, pad, permute, ...).

    ``to_windows`` '(nh nw wh ww)': for each window token, its raster index 'h w' in the map, or h*w (a zero token
    appended to the map) for padding; ``from_windows`` '(h w)': for each map token, its index in the windows.
    ``pad_first``: the padded map is rolled (see the module docstring). Index arithmetic only, so that the sizes may
    be symbolic while torch.export traces.
    """
    h, w = grid
    padded = padded_grid(grid, window)
    rolled = padded if pad_first else (h, w)  # the sides the roll wraps around
    rows, cols = _window_rows_cols(padded, window)  # padded position of each window token
    src_rows, src_cols = _wrap(rows + shift[0], rolled[0]), _wrap(cols + shift[1], rolled[1])  # r holds r + shift
    outside = (src_rows >= h) | (src_cols >= w) if pad_first else (rows >= h) | (cols >= w)
    to_windows = (src_rows * w + src_cols).masked_fill(outside, h * w).flatten()
    slot = torch.arange(padded[0] * padded[1])  # slot[p]: the window index of padded position p (raster)
    slot = torch.empty_like(slot).scatter_(0, (rows * padded[1] + cols).flatten(), slot)
    ys = _wrap(torch.arange(h)[:, None] - shift[0], rolled[0])
    xs = _wrap(torch.arange(w)[None, :] - shift[1], rolled[1])
    return to_windows, slot[ys * padded[1] + xs].flatten()


def _wrap(index: torch.Tensor, n) -> torch.Tensor:
    """``index % n`` for indices in [-n, 2n) by comparisons (the ONNX translation of a tensor modulo a symbolic
    size fails, torch 2.14)."""
    return index - (index >= n).long() * n + (index < 0).long() * n


@cached_tensors(maxsize=64)
def batched(index: torch.Tensor, batch: int, stride: int, device: torch.device) -> torch.Tensor:
    """'(b i)' indices into 'b' stacked blocks of ``stride`` rows: index + k * stride for block k."""
    return (index[None] + torch.arange(batch)[:, None] * stride).flatten().to(device)


def window_mask(mask: torch.Tensor, to_windows: torch.Tensor, grid: Grid, window: Grid, batch: int,
                region_mask: torch.Tensor | None) -> torch.Tensor:
    """A mask over the map's tokens, broadcastable to 'b heads (h w) (h w)', as the windows' '(b nW) heads ws ws'
    (through ``to_windows`` of :func:`window_order`; the padding token h*w attends and is attended), merged with the
    shift regions' additive ``region_mask`` '(b nW) 1 ws ws' (or None)."""
    n = grid[0] * grid[1]
    mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape)).expand(batch, -1, n, n)
    allowed = mask.dtype == torch.bool
    mask = F.pad(mask.to(torch.uint8) if allowed else mask, (0, 1, 0, 1), value=1 if allowed else 0.0)
    slots = to_windows.view(-1, window[0] * window[1])  # 'nW ws': each window slot's map token
    per_window = rearrange(mask[:, :, slots[:, :, None], slots[:, None, :]], 'b h n i j -> (b n) h i j')
    per_window = per_window.bool() if allowed else per_window
    if region_mask is None:
        return per_window
    return region_mask.masked_fill(~per_window, float('-inf')) if allowed else region_mask + per_window


class ShiftedWindowAttention(Attention):
    """:class:`Attention` within (shifted) windows of the token map; takes every Attention part.

    ``window`` (wh, ww) is the build window, ``shifted`` moves the windows by half a window (every other Swin block),
    ``pad_first`` pads before the roll and keeps the built window on any map (see the module docstring).
    ``forward(x, grid)``: x 'b (h w) c' on ``grid`` (h, w) -> 'b (h w) c'; with ``return_attn`` also the weights
    between the map's tokens 'b heads (h w) (h w)', zero between tokens of different windows (as
    :mod:`zoo.attention_maps` reads every attention). The windows and the shift regions' mask come from the grid;
    a ``mask`` over the map's tokens (as :class:`Attention`'s: bool, True = may attend, or additive float,
    broadcastable to 'b heads (h w) (h w)') is cut into the windows and merged with the regions' mask (padding
    tokens are attended as without one).
    """

    def __init__(self, dim: int, num_heads: int, window: Grid, shifted: bool = False, pad_first: bool = False,
                 **kwargs):
        super().__init__(dim, num_heads, **kwargs)
        self.window = (int(window[0]), int(window[1]))
        self.shift = (self.window[0] // 2, self.window[1] // 2) if shifted else (0, 0)
        self.pad_first = pad_first

    def forward(self, x: torch.Tensor, grid: Grid, mask: torch.Tensor | None = None, return_attn: bool = False):
        if grid is None:
            raise ValueError("ShiftedWindowAttention needs the token grid (h, w)")
        (h, w), (b, n, c) = grid, x.shape
        window, shift = fit_window(grid, self.window, self.shift, self.pad_first)
        padded = padded_grid(grid, window)
        exporting = torch.compiler.is_exporting() and not is_static(h, w)  # (torch.compile guards such sizes)
        if exporting and (padded[0] // window[0] < 2 or padded[1] // window[1] < 2):
            raise ValueError(f"{type(self).__name__} traced on a {h}x{w} map with one {window[0]}x{window[1]} window "
                             f"on a side: the trace would fix that count of windows (torch.export treats sizes 1 as "
                             f"constants); trace at an input size at which every stage's map is larger than its "
                             f"window on both sides (e.g. 256x288 for a window of 7 at stride 32)")
        to_windows, from_windows = window_order((h, w), window, shift, self.pad_first)
        tokens = x.reshape(b * n, c)
        static = is_static(h, w)
        if not static or padded != (h, w):  # one zero token per image for the padding: 'b (h w + 1) c' (traced:
            tokens, n = F.pad(x, (0, 0, 0, 1)).flatten(0, 1), n + 1  # always, unused where no padding is needed)
        # 'b (h w) c -> (b nh nw) (wh ww) c' (rolled, padded) by one gather
        windows = tokens.index_select(0, batched(to_windows, b, n, x.device))
        windows = windows.view(-1, window[0] * window[1], c)
        shifted = not static or any(shift)  # traced: always, all zeros where the sides are not shifted
        region_mask = batch_shift_mask(padded, window, shift, b, x.device, x.dtype) if shifted else None
        if mask is not None:
            region_mask = window_mask(mask, to_windows.to(x.device), (h, w), window, b, region_mask)
        out = super().forward(windows, grid=window, mask=region_mask, return_attn=return_attn)
        out, attn = out if return_attn else (out, None)
        # '(b nh nw) (wh ww) c -> b (h w) c' (merged, cropped, rolled back) by one gather
        out = out.reshape(-1, c).index_select(0, batched(from_windows, b, padded[0] * padded[1], x.device))
        out = out.view(b, h * w, c)
        return (out, self._map_weights(attn, from_windows, b)) if return_attn else out

    @staticmethod
    def _map_weights(attn: torch.Tensor, from_windows: torch.Tensor, b: int) -> torch.Tensor:
        """'(b nW) heads n n' window weights -> 'b heads (h w) (h w)' over the map (padding keys left out)."""
        n = attn.shape[-1]
        slot = from_windows.to(attn.device)
        window, pos = slot // n, slot % n  # each map token's window and place in it
        queries, keys = (window[:, None] == window[None, :]).nonzero(as_tuple=True)
        attn = attn.view(b, -1, *attn.shape[1:])  # 'b nW heads n n'
        full = attn.new_zeros(b, attn.shape[2], len(slot), len(slot))
        # indices split by a slice: the indexed dimension comes first, 'L b heads'
        full[:, :, queries, keys] = attn[:, window[queries], :, pos[queries], pos[keys]].permute(1, 2, 0)
        return full

    def extra_repr(self) -> str:
        return f"window={self.window}, shift={self.shift}" + (', pad_first=True' if self.pad_first else '')
