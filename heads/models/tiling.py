"""Tiled inference at any resolution: overlapping tiles, blended with smooth weights, relative depth aligned.

``tiled_inference(predict, x, tile, overlap, align=...)`` runs ``predict`` on one tile at a time and adds each
tile's output, weighted, into image-sized sums, so the model's memory is that of one tile whatever the image size
(the input 'b c H W', the weighted sum 'b k H W' and the weight sum '1 1 H W' are image-sized, nothing else). It
runs without autograd, whether or not the caller has turned it off: a graph kept through the tiles would hold every
tile's activations (for gradients, call ``predict`` on the image itself).

Tiles: along each axis :func:`tile_starts` spreads ``n = ceil((size - overlap) / (tile - overlap))`` tiles evenly
from 0 to ``size - tile``, so neighbours overlap by at least ``overlap`` pixels (an axis shorter than the tile gets
one tile, zero-padded to the tile for the forward pass and cut back).

Weights (:func:`tile_weights`): a tile's weight is the outer product of two 1-D profiles, 1 in its interior and a
ramp across the part it shares with its neighbour on each side that has one (no ramp at the image border). The
ramp over an overlap of ``m`` pixels is ``f(u_j)``, ``u_j = (j + 0.5) / m`` for ``j = 0..m-1`` rising, and the mirror
image ``f(1 - u_j)`` falling, with ``f(u) = u`` ('linear') or ``sin(pi u / 2)**2`` ('cosine'); since
``f(u) + f(1 - u) = 1`` the two weights at an overlap pixel sum to 1 and the blend fades from one tile to the next
with no seam. The blend is ``sum_i w_i p_i / sum_i w_i`` (the division also covers pixels in three tiles along an
axis, where the spread leaves overlaps longer than half a tile).

Relative depth (``align=True``, disparity known up to scale and shift per forward pass): tiles are taken in raster
order (rows top to bottom, each row left to right); the first is the reference, and each later tile's output is
mapped by the least-squares ``s, t`` (:func:`heads.evaluation.metrics.fit_scale_shift`, per image and channel)
that brings it onto the blend so far on the pixels it shares with it (its left neighbour and the tiles above),
before it is blended in. So the result carries the first tile's scale and shift. A fit with ``s <= 0`` (a tile
that would come out upside down, or a flat one) keeps ``s = 1`` and takes the shift alone, the mean difference.
Metric depth and segmentation logits: ``align=False``, the plain weighted blend.
"""
from __future__ import annotations

import math

import torch

from ..evaluation.metrics import fit_scale_shift
from .inference import Predict, predict_window

RAMPS = {'linear': lambda u: u, 'cosine': lambda u: torch.sin(u * (math.pi / 2)) ** 2}


def tile_starts(size: int, tile: int, overlap: int) -> list[int]:
    """Tile origins along one axis: evenly spread from 0 to ``size - tile``, neighbours overlapping by at least
    ``overlap``; one tile at 0 when ``size <= tile``."""
    if not 0 <= overlap < tile:
        raise ValueError(f"tile overlap must be in [0, tile size {tile}), got {overlap}")
    if size <= tile:
        return [0]
    count = -(-(size - overlap) // (tile - overlap))
    return [round(i * (size - tile) / (count - 1)) for i in range(count)]


def ramp_profile(starts: list[int], index: int, tile: int, size: int, ramp: str = 'linear') -> torch.Tensor:
    """The 1-D weight 'n' of tile ``index`` (``n`` = its length inside the image): 1, with a rising ramp across the
    overlap with the previous tile and a falling one across the overlap with the next."""
    if ramp not in RAMPS:
        raise ValueError(f"tile ramp must be one of {', '.join(RAMPS)}, got {ramp!r}")
    start = starts[index]
    length = min(tile, size - start)
    weight = torch.ones(length, dtype=torch.float64)
    if index > 0:
        shared = starts[index - 1] + tile - start
        u = (torch.arange(shared, dtype=torch.float64) + 0.5) / shared
        weight[:shared] *= RAMPS[ramp](u)
    if index + 1 < len(starts):
        shared = start + tile - starts[index + 1]
        u = (torch.arange(shared, dtype=torch.float64) + 0.5) / shared
        weight[length - shared:] *= RAMPS[ramp](1 - u)
    return weight


def tile_weights(rows: list[int], cols: list[int], i: int, j: int, tile: tuple[int, int],
                 size: tuple[int, int], ramp: str = 'linear') -> torch.Tensor:
    """The blend weight 'h w' of tile (row ``i``, column ``j``): the outer product of its two 1-D profiles."""
    return torch.outer(ramp_profile(rows, i, tile[0], size[0], ramp), ramp_profile(cols, j, tile[1], size[1], ramp))


def align_to(out: torch.Tensor, blended: torch.Tensor, shared: torch.Tensor) -> torch.Tensor:
    """``out`` 'b k h w' mapped by the least-squares scale and shift onto ``blended`` 'b k h w' over the pixels
    ``shared`` 'h w' (bool), per image and channel; unchanged where nothing is shared."""
    if not shared.any():
        return out
    aligned = torch.empty_like(out)
    for b in range(out.shape[0]):
        for k in range(out.shape[1]):
            x, y = out[b, k][shared].double(), blended[b, k][shared].double()
            s, t = fit_scale_shift(x, y)
            if s <= 0:
                s, t = torch.ones_like(s), (y - x).mean()
            aligned[b, k] = (s * out[b, k].double() + t).to(out.dtype)
    return aligned


@torch.no_grad()
def tiled_inference(predict: Predict, x: torch.Tensor, tile: tuple[int, int], overlap: int | tuple[int, int],
                    align: bool = False, ramp: str = 'linear') -> torch.Tensor:
    """``predict`` 'b c h w -> b k h w' over overlapping tiles of ``x`` 'b c H W', blended: 'b k H W' (float32, or
    the output's dtype when wider). ``align``: map each tile onto the blend so far by scale and shift first
    (relative depth; see the module docstring)."""
    height, width = x.shape[-2:]
    overlap = (overlap, overlap) if isinstance(overlap, int) else tuple(overlap)
    rows = tile_starts(height, tile[0], overlap[0])
    cols = tile_starts(width, tile[1], overlap[1])
    total = weight = None
    for i, top in enumerate(rows):
        for j, left in enumerate(cols):
            out = predict_window(predict, x, top, left, tile)
            h, w = out.shape[-2:]
            if total is None:
                dtype = torch.promote_types(out.dtype, torch.float32)
                total = x.new_zeros(x.shape[0], out.shape[1], height, width, dtype=dtype)
                weight = x.new_zeros(1, 1, height, width, dtype=dtype)
            out = out.to(total.dtype)
            sums, weights = total[..., top:top + h, left:left + w], weight[..., top:top + h, left:left + w]
            if align:
                shared = weights[0, 0] > 0
                out = align_to(out, sums / weights.clamp(min=torch.finfo(weights.dtype).tiny), shared)
            w_tile = tile_weights(rows, cols, i, j, tile, (height, width), ramp).to(total)
            sums += out * w_tile
            weights += w_tile
    return total / weight
