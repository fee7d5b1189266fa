"""CrossViT (Chen et al. 2021): a small-patch and a large-patch ViT branch fused by CLS cross-attention.

Each branch embeds its own copy of the image (branch i resized by ``img_scales[i]`` to a multiple of its
patch: 240 -> 240 with 12x12 patches and 240 -> 224 with 16x16 patches, as timm), prepends a CLS token
and adds its learned position table, resampled to its own grid, so any input size works (timm rejects
all but its build size). ``len(depths)`` multi-scale blocks follow: per branch a run of
:class:`zoo.core.Block`, then per branch a fusion in which that branch's CLS token, projected to the other
branch's width (LayerNorm, GELU, Linear), queries the other branch's patch tokens with the shared
:class:`zoo.core.Attention` (``num_queries=1``, separate q/k/v Linears) and is projected back.
Numerically timm's ``CrossVit`` (and the official IBM code) given the same weights.
"""
from __future__ import annotations

from fractions import Fraction
from functools import partial

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import (
    Attention,
    Block,
    Checkpointable,
    DropPath,
    LearnedPosEmbed,
    PatchEmbed,
    PrefixTokens,
    SeparateQKV,
    init_linear,
    vit_parts,
)
from ..core.resize import interpolate
from ..registry import register_variant
from .common import drop_path_rates, pair, select_taps
from .inputs import check_images


def multi_conv_stem(patch_size: int, in_chans: int, dim: int) -> nn.Sequential:
    """The '†' (dagger) patch embedding: 7x7/4 conv, then two 3x3 convs to 12x12 or 16x16 patches."""
    if patch_size not in (12, 16):
        raise ValueError(f"the multi-conv patch embedding exists for patches 12 and 16, got {patch_size}")
    second = dict(stride=3, padding=0) if patch_size == 12 else dict(stride=2, padding=1)
    third = dict(stride=1) if patch_size == 12 else dict(stride=2)
    return nn.Sequential(nn.Conv2d(in_chans, dim // 4, 7, stride=4, padding=3), nn.ReLU(inplace=True),
                         nn.Conv2d(dim // 4, dim // 2, 3, **second), nn.ReLU(inplace=True),
                         nn.Conv2d(dim // 2, dim, 3, padding=1, **third))


def traced_grid_side(side, scale: float, patch: int):
    """max(1, round(side * scale / patch)) for a symbolic ``side`` (torch.export tracing a dynamic size), in integer
    arithmetic from ``scale`` as a fraction (Python's round() of a symbolic float would fix the traced size):
    round half to even as round() does."""
    fraction = Fraction(scale).limit_denominator(10000)
    if float(fraction) != scale:
        raise ValueError(f"CrossViT's image scale {scale} is no fraction with a denominator up to 10000: its grid "
                         f"cannot be computed in an exported graph; use such a scale")
    n, d = fraction.numerator, fraction.denominator * patch  # side * n / d
    twice = 2 * side * n
    rounded = (twice + d) // (2 * d)  # halves rounded up
    remainder = twice - (twice // (2 * d)) * (2 * d)
    tie = torch.sym_max(0, 1 - torch.sym_max(remainder - d, d - remainder))  # 1 where side * n / d ends in .5
    return torch.sym_max(1, rounded - tie * (rounded - (rounded // 2) * 2))  # an odd rounded-up half: down


class Branch(nn.Module):
    """'b c H W -> b (1 + h w) d': resize to a multiple of the patch, embed, CLS token, positions."""

    def __init__(self, img_size, scale: float, patch_size: int, in_chans: int, dim: int, multi_conv: bool):
        super().__init__()
        self.scale = scale
        proj = multi_conv_stem(patch_size, in_chans, dim) if multi_conv else None
        self.patch_embed = PatchEmbed(patch_size, in_chans, dim, proj=proj)
        self.prefix = PrefixTokens(dim)
        self.pos_embed = LearnedPosEmbed(self.grid(img_size), dim, num_prefix=1)

    def grid(self, size) -> tuple[int, int]:
        """This branch's token grid for an input of ``size`` (h, w)."""
        p = self.patch_embed.patch_size
        return tuple(max(1, round(s * self.scale / p)) if isinstance(s, int) else traced_grid_side(s, self.scale, p)
                     for s in size)

    def forward(self, x: torch.Tensor):
        grid = self.grid(x.shape[-2:])
        size = (grid[0] * self.patch_embed.patch_size, grid[1] * self.patch_embed.patch_size)
        if tuple(x.shape[-2:]) != size:
            x = interpolate(x, size=size, mode='bicubic', align_corners=False)
        tokens, grid = self.patch_embed(x)
        return self.prefix(tokens) + self.pos_embed(grid), grid


class CrossAttentionBlock(Checkpointable):
    """'b (1 + n) c -> b 1 c': cls + attn(norm1(x)) with only the CLS token (first) as query."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool, norm_layer, attn_drop: float, drop: float,
                 drop_path: float):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(dim, num_heads, qkv=SeparateQKV(dim, bias=qkv_bias, num_queries=1), attn_drop=attn_drop,
                              proj_drop=drop)
        self.drop_path = DropPath(drop_path) if drop_path else nn.Identity()

    def _forward(self, x: torch.Tensor, return_attn: bool = False):
        out = self.attn(self.norm1(x), return_attn=return_attn)
        out, attn = out if return_attn else (out, None)
        x = x[:, :1] + self.drop_path(out)
        return (x, attn) if return_attn else x


def width_projection(dim_in: int, dim_out: int, norm_layer) -> nn.Sequential:
    """LayerNorm, GELU, Linear (keys .0 and .2 as timm)."""
    return nn.Sequential(norm_layer(dim_in), nn.GELU(), nn.Linear(dim_in, dim_out))


class MultiScaleBlock(nn.Module):
    """Per branch a run of blocks, then the CLS cross-attention fusion of each branch with the next."""

    def __init__(self, dims, depths, num_heads, mlp_ratios, qkv_bias: bool, norm_layer, drop: float,
                 attn_drop: float, drop_paths):
        super().__init__()
        n = len(dims)
        self.blocks = nn.ModuleList(
            nn.ModuleList(Block(dims[d], **vit_parts(dims[d], num_heads[d], mlp_ratios[d], qkv_bias=qkv_bias,
                                                     drop=drop, attn_drop=attn_drop),
                                norm_layer=norm_layer, drop_path=drop_paths[i]) for i in range(depths[d]))
            for d in range(n))
        self.projs = nn.ModuleList(width_projection(dims[d], dims[(d + 1) % n], norm_layer) for d in range(n))
        self.fusion = nn.ModuleList(
            CrossAttentionBlock(dims[(d + 1) % n], num_heads[(d + 1) % n], qkv_bias, norm_layer, attn_drop, drop,
                                drop_paths[-1]) for d in range(n))
        self.revert_projs = nn.ModuleList(width_projection(dims[(d + 1) % n], dims[d], norm_layer) for d in range(n))

    def forward(self, xs: list[torch.Tensor], grids: list) -> list[torch.Tensor]:
        """Per branch 'b (1 + h w) d' -> same (a new list; the input list is left as it is)."""
        xs = list(xs)
        for d, blocks in enumerate(self.blocks):
            for block in blocks:
                xs[d] = block(xs[d], grids[d])
        n = len(xs)
        outs = []
        for d in range(n):
            other = xs[(d + 1) % n]
            query = torch.cat([self.projs[d](xs[d][:, :1]), other[:, 1:]], dim=1)  # b (1 + n_other) d_other
            cls = self.revert_projs[d](self.fusion[d](query))                      # b 1 d
            outs.append(torch.cat([cls, xs[d][:, 1:]], dim=1))
        return outs


class CrossViTEncoder(nn.Module):
    """Branches and multi-scale blocks; ``forward_blocks`` returns each block's branch tokens and the grids."""
    family = 'crossvit'
    classifier_only = ('norm.', 'head.')

    def __init__(self, img_size: int | tuple[int, int] = 240, in_chans: int = 3, patch_sizes=(12, 16),
                 img_scales=(1.0, 224 / 240), embed_dims=(192, 384), depths=((1, 4, 0),) * 3, num_heads=(6, 6),
                 mlp_ratios=(4.0, 4.0), multi_conv: bool = False, qkv_bias: bool = True, norm_eps: float = 1e-6,
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0):
        super().__init__()
        size = pair(img_size)
        if any(d[-1] != 0 for d in depths):
            raise ValueError("only one cross-attention layer per fusion (depth entries (.., .., 0)) is supported, "
                             f"got depths {depths}")
        self.embed_dims, self.norm_eps = list(embed_dims), norm_eps
        norm_layer = partial(nn.LayerNorm, eps=norm_eps)
        self.branches = nn.ModuleList(Branch(size, s, p, in_chans, d, multi_conv)
                                      for s, p, d in zip(img_scales, patch_sizes, embed_dims))
        self.pos_drop = nn.Dropout(drop_rate) if drop_rate else nn.Identity()
        per_block = [max(d[:-1]) for d in depths]  # blocks of the deepest branch (+ 0 cross layers)
        rates = drop_path_rates(drop_path_rate, per_block)
        self.blocks = nn.ModuleList(
            MultiScaleBlock(embed_dims, depths[k][:-1], num_heads, mlp_ratios, qkv_bias, norm_layer, drop_rate,
                            attn_drop_rate, rates[k])
            for k in range(len(depths)))
        self.apply(init_linear)

    @property
    def in_chans(self) -> int:
        return self.branches[0].patch_embed.in_chans

    @property
    def min_input_size(self) -> int:
        """The smallest input side: the largest patch (a smaller image has no content for a token)."""
        return max(branch.patch_embed.patch_size for branch in self.branches)

    def forward_blocks(self, x: torch.Tensor, keep=None):
        """({block index: per branch 'b (1 + h w) d'} for the blocks in ``keep`` (default all), [per branch grid])."""
        check_images(self, x)
        embedded = [branch(x) for branch in self.branches]
        xs = [self.pos_drop(tokens) for tokens, _ in embedded]
        grids = [grid for _, grid in embedded]
        outputs = {}
        for i, block in enumerate(self.blocks):
            xs = block(xs, grids)
            if keep is None or i in keep:
                outputs[i] = xs
        return outputs, grids


class CrossViTClassifier(CrossViTEncoder):
    """Per branch a LayerNorm and a Linear head on its CLS token; the logits are the mean of the heads."""

    def __init__(self, num_classes: int = 1000, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.norm = nn.ModuleList(nn.LayerNorm(d, eps=self.norm_eps) for d in self.embed_dims)
        self.head = nn.ModuleList(nn.Linear(d, num_classes) if num_classes else nn.Identity() for d in self.embed_dims)
        self.head.apply(init_linear)

    def forward_features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Per branch the normalised CLS token 'b d'."""
        last = len(self.blocks) - 1
        outputs, _ = self.forward_blocks(x, keep=(last,))
        return [norm(tokens[:, 0]) for norm, tokens in zip(self.norm, outputs[last])]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([head(f) for head, f in zip(self.head, self.forward_features(x))]).mean(0)


class CrossViTBackbone(CrossViTEncoder, Backbone):
    """CrossViT as a dense backbone (:mod:`zoo.contract`): one level per tapped multi-scale block (``out_indices``,
    default (0, 1, 2, 2)), at stride 16.

    Fusion of the two grids: each branch's patch tokens become a map on its own grid (the small-patch branch's is
    20x20 at 240; the large-patch branch, which sees the input scaled by 224/240, gives 14x14); both are resampled
    (bilinear, antialiased when shrinking) onto the (H / 16, W / 16) grid, the large patch's nominal stride as for
    ViT-B/16, and concatenated along channels: 'b (d0 + d1) H/16 W/16'. The level's prefix token is the
    concatenation of the two branch CLS tokens, 'b 1 (d0 + d1)' (``prefix_names == ['cls']``), so a DPT readout
    reads each branch's CLS into that branch's channels. The default repeats the last block as a fourth level,
    which a DPT neck with target strides (4, 8, 16, 32) resamples x0.5 (as for CvT). Blocks after the last tapped
    one are dropped.
    """
    prefix_names = ['cls']

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        levels = len(self.blocks)
        select_taps(self, out_indices, (0, 1, 2, 2), self.blocks, [sum(self.embed_dims)] * levels,
                    [self.branches[-1].patch_embed.patch_size] * levels, 'multi-scale block')

    def forward_taps(self, x: torch.Tensor) -> Taps:
        """Maps 'b (d0 + d1) H/16 W/16' and prefix tokens 'b 1 (d0 + d1)', one per tap."""
        outputs, grids = self.forward_blocks(x, keep=set(self.out_indices))
        target = (x.shape[-2] // self.out_strides[0], x.shape[-1] // self.out_strides[0])
        maps, prefixes = [], []
        for i in self.out_indices:
            branch_maps = []
            for tokens, grid in zip(outputs[i], grids):
                fmap = rearrange(tokens[:, 1:], 'b (h w) d -> b d h w', h=grid[0], w=grid[1])
                if tuple(grid) != target:
                    fmap = interpolate(fmap, size=target, mode='bilinear', align_corners=False, antialias=True)
                branch_maps.append(fmap)
            maps.append(torch.cat(branch_maps, dim=1))
            prefixes.append(torch.cat([tokens[:, :1] for tokens in outputs[i]], dim=-1))
        return Taps(maps, prefixes)


CROSSVIT = {'backbone': CrossViTBackbone, 'classifier': CrossViTClassifier}
CROSSVIT_SIZES = {
    'tiny': dict(embed_dims=(96, 192), depths=((1, 4, 0),) * 3, num_heads=(3, 3), mlp_ratios=(4.0, 4.0)),
    'small': dict(embed_dims=(192, 384), depths=((1, 4, 0),) * 3, num_heads=(6, 6), mlp_ratios=(4.0, 4.0)),
    'base': dict(embed_dims=(384, 768), depths=((1, 4, 0),) * 3, num_heads=(12, 12), mlp_ratios=(4.0, 4.0)),
    '9': dict(embed_dims=(128, 256), depths=((1, 3, 0),) * 3, num_heads=(4, 4), mlp_ratios=(3.0, 3.0)),
    '15': dict(embed_dims=(192, 384), depths=((1, 5, 0),) * 3, num_heads=(6, 6), mlp_ratios=(3.0, 3.0)),
    '18': dict(embed_dims=(224, 448), depths=((1, 6, 0),) * 3, num_heads=(7, 7), mlp_ratios=(3.0, 3.0)),
}
for _size, _kwargs in CROSSVIT_SIZES.items():
    register_variant(f'crossvit_{_size}_240', CROSSVIT, input_size=240, **_kwargs)
    if _size in ('9', '15', '18'):
        register_variant(f'crossvit_{_size}_dagger_240', CROSSVIT, input_size=240, multi_conv=True, **_kwargs)
for _size in ('15', '18'):
    register_variant(f'crossvit_{_size}_dagger_408', CROSSVIT, input_size=408, img_scales=(1.0, 384 / 408),
                     multi_conv=True, **CROSSVIT_SIZES[_size])
