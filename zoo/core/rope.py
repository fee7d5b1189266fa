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

- :class:`DINOv3Rope` (DINOv3, Simeoni et al. 2025): patch centres normalised to [-1, 1] (each axis by its own size,
  or both by the shorter / longer side), row first; pair j of the first half turns by 2 pi y / period_j, of the
  second half by 2 pi x / period_j, with d/4 periods ``base ** (4i / d)`` or geometric from ``min_period`` to
  ``max_period``. Channels pair as (c_j, c_(j + d/2)) ("rotate half"), not (c_2j, c_2j+1). In training mode only,
  the coordinates are shifted, jittered per axis and rescaled by random draws (the official train-time
  augmentations); evaluation uses the plain grid. The periods are computed in float32, unless a checkpoint stored
  them (the official files' ``rope_embed.periods``, rounded to bfloat16 there): then the stored ones, as the official
  model runs on them (the ``stored_periods`` buffer, in the state dict once loaded).

Kernels (:meth:`_Rope.forward`): in eager mode on CPU and CUDA every token is turned at once, the prefix tokens by
the identity (angle 0, no slicing and no concatenation): interleaved pairs as complex numbers (c0 + i c1) times the
unit table cos a + i sin a (one pass, :func:`turn_pairs`), rotate-half pairs as x cos with the sine terms added in
place to its halves (:func:`turn_halves`). The written-out formula x cos + quarter(x) sin on the patch tokens and a
concatenation with the prefix takes six passes: 2x (halves) to 6x (pairs) the time of these on a 2-core Xeon, where
it was ~12% of a ViT-Ti forward. While torch.export / torch.compile / the TorchScript tracer trace, and on other
devices, the written-out formula runs (:meth:`_Rope.turn`): ONNX has no complex numbers.
"""
from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import nn

from .grid import Grid, TokenGrid
from .weight_decay import NoWeightDecay


def grid_coords(grid: Grid, indexing: str = 'xy', ref_grid: Grid | None = None,
                device=None, offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Coordinates '(h w)' of the grid's tokens, row-major: (x, y) for 'xy', (y, x) for 'ij'; indices + ``offset``
    (before the ``ref_grid`` rescaling)."""
    h, w = grid[0], grid[1]  # ints, or symbolic sizes while torch.export traces
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


def half_turn(x: torch.Tensor) -> torch.Tensor:
    """'... d': channel j paired with j + d/2 ("rotate half"): (first, second) -> (-second, first)."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def _as_complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """float32 '... (d two)' as complex '... d' (c_2j + i c_2j+1): a view when the strides allow, else a copy."""
    pairs = x.unflatten(-1, (-1, 2))
    if pairs.stride(-1) != 1 or pairs.storage_offset() % 2 or any(s % 2 for s in pairs.stride()[:-1]):
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    return torch.view_as_complex(pairs)


def turn_pairs(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x '... n (d two)' with each channel pair (c_2j, c_2j+1) turned by the unit complex table '... n d'
    (cos a_j + i sin a_j): (c0 + i c1)(cos a + i sin a), in float32; x's dtype out."""
    turned = torch.view_as_real(_as_complex_pairs(x.float()) * table).flatten(-2)
    return turned.to(x.dtype)


def turn_halves(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x '... n d' with channel j paired with j + d/2 and turned by the angle of ``cos`` '... n d' (each angle on
    both channels of its pair) and ``sin`` '... n (d/2)' (once per pair): x cos, then second * sin taken from its
    first half and first * sin added to its second, in place, in float32 (rounded as the written-out formula, no
    fused multiply-add); x's dtype out."""
    x32, half = x.float(), x.shape[-1] // 2
    out = x32 * cos
    out[..., :half].sub_(x32[..., half:] * sin)  # slices, not chunk: autograd takes in-place ops on them
    out[..., half:].add_(x32[..., :half] * sin)
    return out.to(x.dtype)


def eager_kernels(x: torch.Tensor) -> bool:
    """Whether the one-pass kernels may run: eager mode (not traced by torch.export, torch.compile or TorchScript's
    tracer: ONNX has no complex numbers) on CPU or CUDA."""
    return x.device.type in ('cpu', 'cuda') and not (torch.compiler.is_compiling() or torch.jit.is_tracing())


class _Rope(nn.Module):
    """Subclasses give ``angles(grid, device)`` '(heads | 1) (h w) (d/2)'; forward turns q and k.

    ``pairing``: 'interleaved' turns the channel pairs (c_2j, c_2j+1) (the paper's, timm's RoPE-ViT and EVA), 'half'
    the pairs (c_j, c_j+d/2) (DINOv3's "rotate half"). The tables of a module whose angles depend on the grid only
    (``deterministic``) are computed once per forward and shared by every block with the same settings: kept on the
    forward's :class:`zoo.core.grid.TokenGrid` (timm and DINOv3 compute them once per forward and pass them down);
    not while torch.export / torch.compile traces, nor for a plain tuple grid.
    """
    pairing = 'interleaved'

    def __init__(self, indexing: str = 'xy'):
        super().__init__()
        if indexing not in ('xy', 'ij'):
            raise ValueError(f"rope indexing must be 'xy' (x first) or 'ij' (row first), got {indexing!r}")
        self.indexing = indexing

    @property
    def deterministic(self) -> bool:
        """Whether the angles are a function of the grid and the settings alone (no parameters, no randomness)."""
        return False

    def angles(self, grid: Grid, device) -> torch.Tensor:
        raise NotImplementedError

    def _cached(self, form: tuple, grid: Grid, device, build):
        """``build()``, kept on the forward's :class:`TokenGrid` per (settings, device, ``form``) when the angles are
        deterministic (shared by the forward's blocks with these settings), else computed on each call."""
        if not self.deterministic or not isinstance(grid, TokenGrid) or torch.compiler.is_compiling():
            return build()
        key = (type(self).__qualname__, self.extra_repr(), torch.device(device), form)
        if key not in grid.tables:
            grid.tables[key] = build()
        return grid.tables[key]

    def rotation(self, grid: Grid, device) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) '(heads | 1) (h w) d' of each channel's angle, float32."""
        return self._cached(('rotation',), grid, device, lambda: self._rotation(grid, device))

    def _rotation(self, grid: Grid, device) -> tuple[torch.Tensor, torch.Tensor]:
        angles = self.angles(grid, device).float()
        angles = torch.cat([angles, angles], dim=-1) if self.pairing == 'half' else \
            angles.repeat_interleave(2, dim=-1)  # one angle per channel of its pair
        return angles.cos(), angles.sin()

    def kernel_tables(self, grid: Grid, device, prefix: int) -> tuple[torch.Tensor, ...]:
        """The tables of :func:`turn_pairs` ('interleaved': the complex '(heads | 1) (p + h w) (d/2)') or of
        :func:`turn_halves` ('half': cos '(heads | 1) (p + h w) d', sin '(heads | 1) (p + h w) (d/2)'), float32,
        with angle 0 for the ``prefix`` tokens before the grid (they are turned by the identity)."""
        return self._cached(('kernel', prefix), grid, device, lambda: self._kernel_tables(grid, device, prefix))

    def _kernel_tables(self, grid: Grid, device, prefix: int) -> tuple[torch.Tensor, ...]:
        angles = self.angles(grid, device).float()
        angles = torch.cat([angles.new_zeros(*angles.shape[:-2], prefix, angles.shape[-1]), angles], dim=-2)
        if self.pairing == 'half':
            cos = angles.cos()
            return torch.cat([cos, cos], dim=-1), angles.sin()
        return (torch.polar(torch.ones_like(angles), angles),)

    def turn(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x '... n d' turned by the angles of (cos, sin) '... n d' (float32 math, x's dtype out): the written-out
        formula x cos + quarter(x) sin."""
        x32 = x.float()
        quarter = half_turn(x32) if self.pairing == 'half' else rotate_pairs(x32)
        return (x32 * cos + quarter * sin).to(x.dtype)

    def forward(self, q: torch.Tensor, k: torch.Tensor, grid: Grid | None):
        """q 'b heads m d', k 'b heads n d' (the last h*w of the n tokens on the grid) -> turned q, k."""
        if grid is None:
            raise ValueError(f"{type(self).__name__} needs the token grid (h, w)")
        spatial = grid[0] * grid[1]
        prefix = k.shape[-2] - spatial
        if prefix < 0:
            raise ValueError(f"{type(self).__name__}: {k.shape[-2]} keys cannot hold the {grid[0]}x{grid[1]} grid; "
                             f"rotary positions need every patch token as a key (no strided key/value projection)")
        if eager_kernels(k):  # every token at once, the prefix by angle 0 (no slicing, no concatenation)
            tables = self.kernel_tables(grid, k.device, int(prefix))
            kernel = turn_halves if self.pairing == 'half' else turn_pairs
            queries = q.shape[-2]  # queries may be a leading subset of the tokens (SeparateQKV num_queries)
            return kernel(q, *(t[..., :queries, :] for t in tables)), kernel(k, *tables)
        cos, sin = self.rotation(grid, q.device)  # (heads | 1) (h w) d
        k = torch.cat([k[..., :prefix, :], self.turn(k[..., prefix:, :], cos, sin)], dim=-2)
        if q.shape[-2] > prefix:  # queries may be a leading subset of the tokens (SeparateQKV num_queries)
            queries = q.shape[-2] - prefix
            turned = self.turn(q[..., prefix:, :], cos[..., :queries, :], sin[..., :queries, :])
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

    deterministic = True

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


NORMALIZE_COORDS = ('separate', 'min', 'max')


def centred_coords(grid: Grid, normalize: str = 'separate', device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Patch centres '(h w)' of the grid, row-major, as (y, x) in [-1, 1]: (i + 0.5) / s * 2 - 1 with s the axis's
    own size ('separate'), or the shorter ('min') / longer ('max') side for both (then the other axis spans less or
    more than [-1, 1])."""
    h, w = grid[0], grid[1]  # ints, or symbolic sizes while torch.export traces
    sizes = {'separate': (h, w), 'min': (torch.sym_min(h, w),) * 2, 'max': (torch.sym_max(h, w),) * 2}
    if normalize not in sizes:
        raise ValueError(f"rope normalize must be one of {', '.join(map(repr, NORMALIZE_COORDS))}, got {normalize!r}")
    ys = torch.arange(0.5, h, device=device, dtype=torch.float32) / sizes[normalize][0]
    xs = torch.arange(0.5, w, device=device, dtype=torch.float32) / sizes[normalize][1]
    y, x = torch.meshgrid(ys, xs, indexing='ij')
    return 2.0 * y.flatten() - 1.0, 2.0 * x.flatten() - 1.0


class DINOv3Rope(_Rope):
    """DINOv3's RoPE (see the module docstring): no parameters; ``shift`` (coordinates + U(-shift, shift) per axis),
    ``jitter`` (times exp U(-log J, log J) per axis) and ``rescale`` (times exp U(-log R, log R), both axes), drawn once
    per call, in this order, in training mode only."""
    pairing = 'half'

    @property
    def deterministic(self) -> bool:
        return not self.training or (self.shift, self.jitter, self.rescale) == (None, None, None)

    def __init__(self, head_dim: int, base: float | None = 100.0, min_period: float | None = None,
                 max_period: float | None = None, normalize: str = 'separate', shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None):
        super().__init__('ij')
        if head_dim % 4:
            raise ValueError(f"2-D RoPE needs a head width divisible by 4, got {head_dim}")
        if (min_period is None) != (max_period is None) or (base is None) == (min_period is None):
            raise ValueError(f"DINOv3 rope periods: give either base (got {base}) or both min_period and max_period "
                             f"(got {min_period}, {max_period}), not both")
        if normalize not in NORMALIZE_COORDS:
            raise ValueError(f"rope normalize must be one of {', '.join(map(repr, NORMALIZE_COORDS))}, "
                             f"got {normalize!r}")
        for name, value, least in (('shift', shift, 0.0), ('jitter', jitter, 1.0), ('rescale', rescale, 1.0)):
            if value is not None and not value >= least:
                raise ValueError(f"rope {name} must be None or >= {least}, got {value}")
        self.head_dim, self.base, self.min_period, self.max_period = head_dim, base, min_period, max_period
        self.normalize, self.shift, self.jitter, self.rescale = normalize, shift, jitter, rescale
        self.register_buffer('stored_periods', None)  # a checkpoint's periods (module docstring); None: computed

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """A checkpoint's ``stored_periods`` '(d/4)' replace the computed periods; a checkpoint without them puts
        the computed ones back."""
        stored = state_dict.pop(prefix + 'stored_periods', None)
        self.stored_periods = None
        if stored is not None and tuple(stored.shape) != (self.head_dim // 4,):
            error_msgs.append(f"{prefix}stored_periods: expected {self.head_dim // 4} periods (a head width of "
                              f"{self.head_dim} / 4), got shape {tuple(stored.shape)}")
        elif stored is not None:
            self.stored_periods = stored.detach().to(torch.float32).clone()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def periods(self, device=None) -> torch.Tensor:
        """'(d/4)': base ** (4i / d), or min_period * (max_period / min_period) ** (i / (d/4 - 1)); or the periods
        a checkpoint stored."""
        if self.stored_periods is not None:
            return self.stored_periods.to(device)
        bands = self.head_dim // 4
        if self.base is not None:
            return self.base ** (2 * torch.arange(bands, device=device, dtype=torch.float32) / (self.head_dim // 2))
        steps = torch.linspace(0, 1, bands, device=device, dtype=torch.float32)
        return self.min_period * (self.max_period / self.min_period) ** steps

    def coords(self, grid: Grid, device=None) -> torch.Tensor:
        """'(h w) 2' (y, x), augmented in training mode."""
        coords = torch.stack(centred_coords(grid, self.normalize, device), dim=-1)
        if not self.training:
            return coords
        if self.shift is not None:
            coords = coords + torch.empty(2, device=device).uniform_(-self.shift, self.shift)
        if self.jitter is not None:
            limit = math.log(self.jitter)
            coords = coords * torch.empty(2, device=device).uniform_(-limit, limit).exp()
        if self.rescale is not None:
            limit = math.log(self.rescale)
            coords = coords * torch.empty(1, device=device).uniform_(-limit, limit).exp()
        return coords

    def angles(self, grid: Grid, device) -> torch.Tensor:
        """'1 (h w) (d/2)': [y angles | x angles], 2 pi coordinate / period."""
        angles = 2 * math.pi * self.coords(grid, device)[:, :, None] / self.periods(device)  # (h w) 2 (d/4)
        return angles.flatten(1)[None]

    def extra_repr(self) -> str:
        periods = f"base={self.base}" if self.base is not None else \
            f"min_period={self.min_period}, max_period={self.max_period}"
        stored = '' if self.stored_periods is None else f", stored periods {self.stored_periods.tolist()}"
        return f"head_dim={self.head_dim}, {periods}, normalize={self.normalize!r}, shift={self.shift}, " \
               f"jitter={self.jitter}, rescale={self.rescale}{stored}"


def make_rope(spec: dict | None, head_dim: int, num_heads: int) -> _Rope | None:
    """A rope module from a config dict: ``dict(kind='axial' | 'mixed', temperature=..., indexing='xy' | 'ij',
    ref_grid=(h, w), offset=... (axial only))`` or ``dict(kind='dinov3', base=..., min_period=..., max_period=...,
    normalize=..., shift=..., jitter=..., rescale=...)`` (:class:`DINOv3Rope`); None for None."""
    if spec is None:
        return None
    spec = dict(spec)
    kind = spec.pop('kind', 'axial')
    allowed = {'axial': {'temperature', 'indexing', 'ref_grid', 'offset'}, 'mixed': {'temperature', 'indexing'},
               'dinov3': {'base', 'min_period', 'max_period', 'normalize', 'shift', 'jitter', 'rescale'}}
    if kind not in allowed:
        raise ValueError(f"rope kind must be 'axial', 'mixed' or 'dinov3', got {kind!r}")
    unknown = sorted(set(spec) - allowed[kind])
    if unknown:
        raise ValueError(f"rope kind {kind!r} does not take {unknown}; it takes {sorted(allowed[kind])}")
    if kind == 'axial':
        return AxialRope(head_dim, **spec)
    if kind == 'dinov3':
        return DINOv3Rope(head_dim, **spec)
    return MixedRope(head_dim, num_heads, **spec)
