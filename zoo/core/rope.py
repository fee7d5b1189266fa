"""2-D rotary position embedding (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer") for
:class:`zoo.core.Attention`'s ``rope`` hook.

A rope module rotates q 'b heads m d' and k 'b heads n d' by angles that depend on each patch token's (x, y)
position, so that q.k depends on the offset between the two patches. The head channels are taken in pairs
(c0, c1), (c2, c3), ...; pair j of the token at position t turns by the angle a_j(t):

    (c0, c1) -> (c0 cos a - c1 sin a, c1 cos a + c0 sin a)

- :class:`AxialRope` (RoPE-Axial): the first half of the pairs turn with the first coordinate, the second half
  with the other, at fixed frequencies ``temperature ** -(i / (d/4))``, i = 0 .. d/4 - 1;
- :class:`MixedRope` (RoPE-Mixed): every pair turns by fx_j x + fy_j y with learned frequencies per head (one
  module per block, so per block too), initialised as the paper: magnitudes ``temperature ** -(4i / d)`` in
  a direction drawn per head, and that direction turned by 90 degrees for the second half of the pairs.

Positions are patch indices 0 .. h-1 / 0 .. w-1 of the input's grid (any grid, nothing is resampled); with
``ref_grid`` they are rescaled so that the grid spans ``ref_grid`` (EVA's rule, timm's ``ref_feat_shape``).
``indexing='xy'`` takes x (the column) as the first coordinate (the paper's and timm's RoPE-ViT), 'ij' the row
(EVA). The tokens before the grid's h*w (CLS, registers) are not turned. Angles are computed in float32.
"""
from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import nn

from .grid import Grid
from .weight_decay import NoWeightDecay


def grid_coords(grid: Grid, indexing: str = 'xy', ref_grid: Grid | None = None,
                device=None, offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Coordinates '(h w)' of the grid's tokens, row-major: (x, y) for 'xy', (y, x) for 'ij'; indices + ``offset``
    (before the ``ref_grid`` rescaling)."""
    h, w = int(grid[0]), int(grid[1])
    ys = torch.arange(h, device=device, dtype=torch.float32) + offset
    xs = torch.arange(w, device=device, dtype=torch.float32) + offset
    if ref_grid is not None:
        ys, xs = ys * (ref_grid[0] / h), xs * (ref_grid[1] / w)
    y, x = torch.meshgrid(ys, xs, indexing='ij')
    y, x = y.flatten(), x.flatten()
    if indexing == 'xy':
        return x, y
    if indexing == 'ij':
        return y, x
    raise ValueError(f"rope indexing must be 'xy' (x first) or 'ij' (row first), got {indexing!r}")


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """'... (d two)': each channel pair (c0, c1) -> (-c1, c0), the quarter turn that the rotation's sine scales."""
    pairs = rearrange(x, '... (d two) -> ... d two', two=2)
    return rearrange(torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1), '... d two -> ... (d two)')


def apply_rotation(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """x '... n d' turned pairwise by ``angles`` '... n (d/2)' (float32 math, x's dtype out)."""
    angles = angles.repeat_interleave(2, dim=-1)  # one angle per channel of its pair
    out = x.float() * angles.cos() + rotate_pairs(x.float()) * angles.sin()
    return out.to(x.dtype)


class _Rope(nn.Module):
    """Subclasses give ``angles(grid, device)`` '(heads | 1) (h w) (d/2)'; forward turns q and k."""

    def __init__(self, indexing: str = 'xy'):
        super().__init__()
        if indexing not in ('xy', 'ij'):
            raise ValueError(f"rope indexing must be 'xy' (x first) or 'ij' (row first), got {indexing!r}")
        self.indexing = indexing

    def angles(self, grid: Grid, device) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, q: torch.Tensor, k: torch.Tensor, grid: Grid | None):
        """q 'b heads m d', k 'b heads n d' (the last h*w of the n tokens on the grid) -> turned q, k."""
        if grid is None:
            raise ValueError(f"{type(self).__name__} needs the token grid (h, w)")
        spatial = int(grid[0]) * int(grid[1])
        prefix = k.shape[-2] - spatial
        if prefix < 0:
            raise ValueError(f"{type(self).__name__}: {k.shape[-2]} keys cannot hold the {grid[0]}x{grid[1]} grid; "
                             f"rotary positions need every patch token as a key (no strided key/value projection)")
        angles = self.angles(grid, q.device)  # (heads | 1) (h w) (d/2)
        k = torch.cat([k[..., :prefix, :], apply_rotation(k[..., prefix:, :], angles)], dim=-2)
        if q.shape[-2] > prefix:  # queries may be a leading subset of the tokens (SeparateQKV num_queries)
            turned = apply_rotation(q[..., prefix:, :], angles[..., :q.shape[-2] - prefix, :])
            q = torch.cat([q[..., :prefix, :], turned], dim=-2)
        return q, k


class AxialRope(_Rope):
    """RoPE-Axial: fixed frequencies, half of the channel pairs per axis (no parameters). ``offset``: added to the
    patch indices before the ``ref_grid`` rescaling (Perception Encoder: positions 1 .. h, 1 .. w; timm's
    ``rope_grid_offset``)."""

    def __init__(self, head_dim: int, temperature: float = 100.0, indexing: str = 'xy', ref_grid: Grid | None = None,
                 offset: float = 0.0):
        super().__init__(indexing)
        self.offset = float(offset)
        if head_dim % 4:
            raise ValueError(f"2-D RoPE needs a head width divisible by 4, got {head_dim}")
        self.head_dim, self.temperature = head_dim, float(temperature)
        self.ref_grid = None if ref_grid is None else (int(ref_grid[0]), int(ref_grid[1]))

    def frequencies(self, device=None) -> torch.Tensor:
        """'(d/4)': temperature ** -(i / (d/4))."""
        bands = self.head_dim // 4
        return self.temperature ** -(torch.arange(bands, device=device, dtype=torch.float32) / bands)

    def angles(self, grid: Grid, device) -> torch.Tensor:
        first, second = grid_coords(grid, self.indexing, self.ref_grid, device, self.offset)
        freqs = self.frequencies(device)
        return torch.cat([first[:, None] * freqs, second[:, None] * freqs], dim=-1)[None]  # 1 (h w) (d/2)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, temperature={self.temperature}, indexing={self.indexing!r}, " \
               f"ref_grid={self.ref_grid}" + (f", offset={self.offset}" if self.offset else '')


class MixedRope(NoWeightDecay, _Rope):
    """RoPE-Mixed: learned frequencies ``freqs`` '2 heads (d/2)' (x and y components per channel pair); no weight
    decay on them (as the paper and timm)."""
    no_weight_decay_names = ('freqs',)

    def __init__(self, head_dim: int, num_heads: int, temperature: float = 10.0, indexing: str = 'xy'):
        super().__init__(indexing)
        if head_dim % 4:
            raise ValueError(f"2-D RoPE needs a head width divisible by 4, got {head_dim}")
        magnitude = temperature ** -(torch.arange(0, head_dim, 4, dtype=torch.float32) / head_dim)  # d/4
        direction = torch.rand(num_heads, 1) * 2 * math.pi  # heads 1
        fx = torch.cat([magnitude * direction.cos(), magnitude * (direction + math.pi / 2).cos()], dim=-1)
        fy = torch.cat([magnitude * direction.sin(), magnitude * (direction + math.pi / 2).sin()], dim=-1)
        self.freqs = nn.Parameter(torch.stack([fx, fy]))  # 2 heads (d/2)

    def angles(self, grid: Grid, device) -> torch.Tensor:
        first, second = grid_coords(grid, self.indexing, None, device)
        freqs = self.freqs.float()
        # heads (h w) (d/2): a product, not a matmul, so that autocast keeps it in float32
        return first[None, :, None] * freqs[0][:, None] + second[None, :, None] * freqs[1][:, None]

    def extra_repr(self) -> str:
        return f"num_heads={self.freqs.shape[1]}, head_dim={2 * self.freqs.shape[2]}, indexing={self.indexing!r}"


def make_rope(spec: dict | None, head_dim: int, num_heads: int) -> _Rope | None:
    """A rope module from a config dict: ``dict(kind='axial' | 'mixed', temperature=..., indexing='xy' | 'ij',
    ref_grid=(h, w), offset=... (axial only))``; None for None."""
    if spec is None:
        return None
    spec = dict(spec)
    kind = spec.pop('kind', 'axial')
    allowed = {'axial': {'temperature', 'indexing', 'ref_grid', 'offset'}, 'mixed': {'temperature', 'indexing'}}
    if kind not in allowed:
        raise ValueError(f"rope kind must be 'axial' or 'mixed', got {kind!r}")
    unknown = sorted(set(spec) - allowed[kind])
    if unknown:
        raise ValueError(f"rope kind {kind!r} does not take {unknown}; it takes {sorted(allowed[kind])}")
    if kind == 'axial':
        return AxialRope(head_dim, **spec)
    return MixedRope(head_dim, num_heads, **spec)
