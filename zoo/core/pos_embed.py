"""Positional encodings: learned (resampled to any grid), fixed 2-D sin-cos, or none."""
from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import nn

from .grid import Grid
from .resize import interpolate
from .weight_decay import NoWeightDecay

#: DINOv2's resampling ('dinov2' mode) asks for scale factors (new + offset) / old instead of the new size: the
#: sampling positions move by a hair (facebookresearch/dino issue 8), which its checkpoints were evaluated with.
DINOV2_OFFSET = 0.1


def is_symbolic(grid) -> bool:
    """True while a grid is traced with dynamic shapes (torch.export, ONNX export): its sides are SymInts, and
    comparing them with a build grid would bake that comparison into the program as a guard (an exported ViT
    would then refuse its own build size). Resampling to the same grid is an exact identity (bicubic/bilinear
    weights at scale 1 are 0 and 1), so traced code simply always resamples; eager code is unchanged."""
    return any(isinstance(side, torch.SymInt) for side in grid)


def resample_grid_embed(embed: torch.Tensor, new_grid: Grid, old_grid: Grid, num_prefix: int = 0,
                        mode: str = 'bicubic', antialias: bool = True) -> torch.Tensor:
    """Resample '1 (p + h w) d' position embeddings from ``old_grid`` (h, w) to ``new_grid``.

    The first ``num_prefix`` rows (CLS, distillation, ... tokens) are kept as they are; the grid part is
    interpolated in float32 with ``mode`` ('bicubic' as timm/mmseg/detectron2, 'bilinear' as DPT/HF, 'dinov2' as
    the official DINOv2 and Depth Anything code: bicubic at scale factors (new + 0.1) / old, :data:`DINOV2_OFFSET`)
    and cast back to the input dtype. The old grid is explicit: non-square grids are never guessed.
    """
    old_grid, new_grid = tuple(old_grid), tuple(new_grid)
    n = embed.shape[1] - num_prefix
    if n != old_grid[0] * old_grid[1]:
        raise ValueError(f"position embedding has {n} grid rows, which is not the old grid "
                         f"{old_grid[0]}x{old_grid[1]} (with {num_prefix} prefix rows)")
    if not is_symbolic(new_grid) and old_grid == new_grid:  # traced: no guard on the grid (see is_symbolic)
        return embed
    prefix, grid_part = embed[:, :num_prefix], embed[:, num_prefix:]
    grid_part = rearrange(grid_part.float(), '1 (h w) d -> 1 d h w', h=old_grid[0])
    antialias = antialias and mode in ('bilinear', 'bicubic', 'dinov2')
    if mode == 'dinov2':  # the output size is floor(old * scale) = new
        scale = tuple((new + DINOV2_OFFSET) / old for new, old in zip(new_grid, old_grid))
        grid_part = interpolate(grid_part, scale_factor=scale, mode='bicubic', antialias=antialias,
                                align_corners=False)
    else:
        grid_part = interpolate(grid_part, size=new_grid, mode=mode, antialias=antialias,
                                align_corners=False if mode in ('bilinear', 'bicubic') else None)
    grid_part = rearrange(grid_part, '1 d h w -> 1 (h w) d').to(embed.dtype)
    return torch.cat([prefix, grid_part], dim=1)


def square_grid(num_tokens: int) -> Grid:
    """The grid of a checkpoint that stores no grid: square, or an error asking for it."""
    side = math.isqrt(num_tokens)
    if side * side != num_tokens:
        raise ValueError(f"cannot infer the grid of a position embedding with {num_tokens} grid rows "
                         f"(not a square); pass the checkpoint's grid explicitly")
    return side, side


def flatten_grid_table(table: torch.Tensor, num_prefix: int = 0) -> tuple[torch.Tensor, Grid]:
    """A position table '1 d h w' (timm's PiT stores its table so) as '1 (h w) d' and its grid (h, w)."""
    if table.shape[0] != 1 or num_prefix:
        raise ValueError(f"a 4-D position table is '1 d h w' without prefix rows, got shape {tuple(table.shape)} "
                         f"for an embedding with {num_prefix} prefix rows")
    return rearrange(table, '1 d h w -> 1 (h w) d'), (table.shape[2], table.shape[3])


class LearnedPosEmbed(NoWeightDecay, nn.Module):
    """Learned absolute position embedding ``weight`` '1 (p + h w) d' for a build grid (h, w).

    ``num_prefix`` rows belong to prefix tokens (0 when the prefix tokens get no position, as in
    DeiT-3 / register models). ``forward(grid)`` returns the embedding resampled to ``grid``. The table takes no
    weight decay.
    """
    no_weight_decay_names = ('weight',)

    def __init__(self, grid: Grid, dim: int, num_prefix: int = 0, mode: str = 'bicubic', antialias: bool = True):
        super().__init__()
        self.grid = tuple(grid)
        self.num_prefix = num_prefix
        self.mode = mode
        self.antialias = antialias
        self.weight = nn.Parameter(torch.empty(1, num_prefix + self.grid[0] * self.grid[1], dim))
        nn.init.trunc_normal_(self.weight, std=0.02)

    def forward(self, grid: Grid) -> torch.Tensor:
        if not is_symbolic(grid) and tuple(grid) == self.grid:  # traced: always resample (see is_symbolic)
            return self.weight
        return resample_grid_embed(self.weight, grid, self.grid, self.num_prefix, self.mode, self.antialias)

    checkpoint_key = 'weight'  # the parameter load_pretrained resizes with resample_checkpoint

    def resample_checkpoint(self, weight: torch.Tensor, old_grid: Grid | None = None) -> torch.Tensor:
        """A checkpoint's embedding (its own grid, same prefix rows) resampled to this module's grid: '1 (p + h w) d'
        (a square grid unless ``old_grid`` says otherwise) or a table '1 d h w' that carries its grid (timm's PiT)."""
        if weight.ndim == 4:
            weight, old_grid = flatten_grid_table(weight, self.num_prefix)
        elif weight.ndim != 3 or weight.shape[0] != 1 or weight.shape[1] < self.num_prefix:
            raise ValueError(f"a position embedding is '1 (prefix + h w) d' with {self.num_prefix} prefix rows "
                             f"or '1 d h w', got shape {tuple(weight.shape)}")
        old_grid = old_grid or square_grid(weight.shape[1] - self.num_prefix)
        return resample_grid_embed(weight, self.grid, old_grid, self.num_prefix, self.mode, self.antialias)

    def extra_repr(self) -> str:
        return f"grid={self.grid}, num_prefix={self.num_prefix}, mode={self.mode!r}"


def sincos_2d(grid: Grid, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Fixed 2-D sin-cos embedding '1 (h w) d': quarters [sin x*w_k, cos x*w_k, sin y*w_k, cos y*w_k],
    w_k = temperature ** (-k / (d/4)), with x the column and y the row of each token."""
    if dim % 4:
        raise ValueError(f"2-D sin-cos position embedding needs a width divisible by 4, got {dim}")
    h, w = grid
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                            indexing='ij')
    omega = 1.0 / temperature ** (torch.arange(dim // 4, dtype=torch.float32) / (dim // 4))
    out_x = xs.reshape(-1, 1) * omega
    out_y = ys.reshape(-1, 1) * omega
    return torch.cat([out_x.sin(), out_x.cos(), out_y.sin(), out_y.cos()], dim=1)[None]


def sincos_1d(length: int, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Fixed 1-D sin-cos embedding 'length d' of positions 0 .. length-1, interleaved (Vaswani et al.): channel 2k
    sin(p w_k), 2k+1 cos(p w_k), w_k = temperature ** (-2k / d)."""
    if dim % 2:
        raise ValueError(f"1-D sin-cos position embedding needs an even width, got {dim}")
    angles = torch.arange(length, dtype=torch.float32)[:, None] * \
        torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(temperature) / dim))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


class SinCosPosEmbed(nn.Module):
    """Fixed 2-D sin-cos embedding computed for the grid of each input (no parameters, any size)."""

    def __init__(self, dim: int, temperature: float = 10000.0):
        super().__init__()
        self.dim = dim
        self.temperature = temperature
        self.num_prefix = 0

    def forward(self, grid: Grid) -> torch.Tensor:
        return sincos_2d(grid, self.dim, self.temperature)


def crop_grid_embed(embed: torch.Tensor, new_grid: Grid, old_grid: Grid, align_corners: bool = False) -> torch.Tensor:
    """A '1 (h w) d' table on ``old_grid`` resampled bilinearly (no antialias) to the square s x s of the larger side
    s = max(new_grid), then cropped to its top-left ``new_grid`` rows and columns: '1 (h' w') d'. A wide input thus
    reads the table's top rows at the scale of its width instead of squeezing the table's aspect ratio."""
    old_grid, (h, w) = tuple(old_grid), tuple(new_grid)
    side = max(h, w)
    if not is_symbolic((h, w)) and old_grid == (h, w):
        return embed
    table = rearrange(embed.float(), '1 (h w) d -> 1 d h w', h=old_grid[0])
    if is_symbolic((h, w)) or old_grid != (side, side):  # bilinear at scale 1 is an identity either way
        table = interpolate(table, size=(side, side), mode='bilinear', align_corners=align_corners)
    return rearrange(table[:, :, :h, :w], '1 d h w -> 1 (h w) d').to(embed.dtype)


class CroppedPosEmbed(LearnedPosEmbed):
    """Learned table '1 (h w) d' on the patch tokens only (no prefix rows), read by cropping (:func:`crop_grid_embed`):
    for an input grid (h', w') the table is resampled bilinearly to max(h', w') squared and its top-left h' x w' part
    is kept. ``align_corners`` is the bilinear resampling's corner rule. A checkpoint's larger table (RADIO's 128 x 128
    one) is brought to the build grid by the same rule on loading."""

    def __init__(self, grid: Grid, dim: int, align_corners: bool = False):
        super().__init__(grid, dim, num_prefix=0, mode='bilinear', antialias=False)
        self.align_corners = align_corners

    def forward(self, grid: Grid) -> torch.Tensor:
        return crop_grid_embed(self.weight, grid, self.grid, self.align_corners)

    def resample_checkpoint(self, weight: torch.Tensor, old_grid: Grid | None = None) -> torch.Tensor:
        if weight.ndim == 4:
            weight, old_grid = flatten_grid_table(weight)
        elif weight.ndim != 3 or weight.shape[0] != 1:
            raise ValueError(f"a cropped position table is '1 (h w) d' or '1 d h w', got shape {tuple(weight.shape)}")
        old_grid = old_grid or square_grid(weight.shape[1])
        return crop_grid_embed(weight, self.grid, old_grid, self.align_corners)

    def extra_repr(self) -> str:
        return f"grid={self.grid}, cropped, align_corners={self.align_corners}"
