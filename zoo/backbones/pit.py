"""PiT (Heo et al. 2021, "Rethinking Spatial Dimensions of Vision Transformers"): a ViT made multi-scale by pooling.

An overlapping conv patch embedding (``patch_size`` 2 * ``stride``, no padding: 16/8 gives 27x27 tokens at 224),
learned positions added to the patch tokens (resampled to each input's grid, so any size works; timm fixes the
size at build time), CLS (and distillation) tokens, then stages of :class:`zoo.core.Block`. Between stages a
pooling layer halves the grid and widens the tokens: a depthwise 3x3 conv of stride 2 on the map (each channel
giving ``out / in`` channels) and a Linear on the prefix tokens. Numerically timm's ``PoolingVisionTransformer``
given the same weights.

Keys: ``patch_embed.proj``, ``pos_embed.weight`` '1 (h w) d', ``prefix.{cls,dist}``,
``stages.{i}.pool.{conv,fc}``, ``stages.{i}.blocks.{j}...``, ``norm``, ``head``, ``head_dist``;
:mod:`zoo.weights` converts timm's layout.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import Block, LayerNorm6, LearnedPosEmbed, PatchEmbed, PrefixTokens, init_linear, vit_parts
from ..registry import register_variant
from .common import drop_path_rates, pair, run_blocks, run_stages, select_taps
from .inputs import check_images


class TokenPool(nn.Module):
    """'b d h w -> b d' h/2 w/2' by a depthwise strided conv (kernel stride + 1); prefix 'b p d -> b p d'' by a
    Linear."""

    def __init__(self, in_dim: int, out_dim: int, stride: int = 2):
        super().__init__()
        self.conv = nn.Conv2d(in_dim, out_dim, stride + 1, stride, stride // 2, groups=in_dim)
        self.fc = nn.Linear(in_dim, out_dim)

    def forward(self, fmap: torch.Tensor, prefix: torch.Tensor):
        return self.conv(fmap), self.fc(prefix)


class PiTStage(nn.Module):
    """Optional pooling, then blocks on the prefix and patch tokens 'b (p + h w) d'."""

    def __init__(self, in_dim: int, dim: int, depth: int, num_heads: int, mlp_ratio: float, pool: bool,
                 drop: float, attn_drop: float, drop_paths):
        super().__init__()
        self.pool = TokenPool(in_dim, dim) if pool else None
        self.blocks = nn.ModuleList(Block(dim, **vit_parts(dim, num_heads, mlp_ratio, drop=drop, attn_drop=attn_drop),
                                          norm_layer=LayerNorm6, drop_path=rate) for rate in drop_paths)

    def forward(self, fmap: torch.Tensor, prefix: torch.Tensor):
        """map 'b d h w', prefix 'b p d' -> the same after pooling and blocks."""
        if self.pool is not None:
            fmap, prefix = self.pool(fmap, prefix)
        grid, p = fmap.shape[-2:], prefix.shape[1]
        x = torch.cat([prefix, rearrange(fmap, 'b d h w -> b (h w) d')], dim=1)
        x = run_blocks(self.blocks, x, grid)
        return rearrange(x[:, p:], 'b (h w) d -> b d h w', h=grid[0], w=grid[1]), x[:, :p]


class PiTEncoder(nn.Module):
    """Patch embedding, positions, prefix tokens and the stages; ``forward_stages`` gives each stage's output."""
    family = 'pit'
    classifier_only = ('norm.', 'head.', 'head_dist.')

    def __init__(self, img_size: int | tuple[int, int] = 224, in_chans: int = 3, patch_size: int = 16,
                 stride: int = 8, base_dims=(48, 48, 48), depths=(2, 6, 4), num_heads=(3, 6, 12),
                 mlp_ratio: float = 4.0, distilled: bool = False, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0):
        super().__init__()
        if not len(base_dims) == len(depths) == len(num_heads):
            raise ValueError(f"base_dims {base_dims}, depths {depths} and num_heads {num_heads} need one entry per "
                             f"stage")
        self.in_chans, self.patch_size, self.stride = in_chans, patch_size, stride
        self.dims = [b * h for b, h in zip(base_dims, num_heads)]
        self.patch_embed = PatchEmbed(patch_size, in_chans, self.dims[0], stride=stride)
        grid = tuple((s - patch_size) // stride + 1 for s in pair(img_size))
        self.pos_embed = LearnedPosEmbed(grid, self.dims[0])
        self.prefix = PrefixTokens(self.dims[0], dist=distilled)
        self.pos_drop = nn.Dropout(drop_rate) if drop_rate else nn.Identity()
        rates = drop_path_rates(drop_path_rate, depths)
        ins = self.dims[:1] + self.dims[:-1]
        self.stages = nn.ModuleList(
            PiTStage(ins[i], self.dims[i], depths[i], num_heads[i], mlp_ratio, i > 0, drop_rate, attn_drop_rate,
                     rates[i]) for i in range(len(depths)))
        self.apply(init_linear)

    @property
    def min_input_size(self) -> int:
        """The smallest input side: one patch (every later map is then 1x1)."""
        return self.patch_size

    @property
    def prefix_names(self) -> list[str]:
        return self.prefix.names

    def forward_stages(self, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per stage: map 'b d h w' and prefix tokens 'b p d'."""
        check_images(self, x)
        tokens, grid = self.patch_embed(x)
        tokens = self.pos_drop(tokens + self.pos_embed(grid))
        fmap = rearrange(tokens, 'b (h w) d -> b d h w', h=grid[0], w=grid[1])
        prefix = self.prefix(tokens[:, :0])  # 'b p d'
        return run_stages(self.stages, fmap, prefix)


class PiTClassifier(PiTEncoder):
    """LayerNorm on the prefix tokens of the last stage, a Linear head on CLS (and ``head_dist`` on the distillation
    token: in training both logits, in evaluation their mean, as DeiT)."""

    def __init__(self, num_classes: int = 1000, **kwargs):
        super().__init__(**kwargs)
        dim = self.dims[-1]
        self.num_classes = num_classes
        self.norm = LayerNorm6(dim)
        self.head = nn.Linear(dim, num_classes) if num_classes else nn.Identity()
        self.head_dist = (nn.Linear(dim, num_classes) if num_classes else nn.Identity()) \
            if self.prefix.dist is not None else None
        init_linear(self.head)
        if self.head_dist is not None:
            init_linear(self.head_dist)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """'b c H W -> b p d': the normalised prefix tokens."""
        return self.norm(self.forward_stages(x)[-1][1])

    def forward(self, x: torch.Tensor):
        prefix = self.forward_features(x)
        if self.head_dist is None:
            return self.head(prefix[:, 0])
        cls, dist = self.head(prefix[:, 0]), self.head_dist(prefix[:, 1])
        return (cls, dist) if self.training else (cls + dist) / 2


def to_stride_grid(fmap: torch.Tensor) -> torch.Tensor:
    """'b d (H/s - 1) (W/s - 1) -> b d H/s W/s': the first stage's map moved onto the stride grid.

    With patch 2s and no padding, token i covers the input from s i to s i + 2s: its centre s (i + 1) lies halfway
    between the stride-s cell centres s (i + 1/2) and s (i + 3/2). Each cell therefore takes the mean of its two
    neighbouring tokens (the edge token repeated at the borders): exact linear interpolation at the cell centres.
    """
    return F.avg_pool2d(F.pad(fmap, (1, 1, 1, 1), mode='replicate'), 2, stride=1)


class PiTBackbone(PiTEncoder, Backbone):
    """PiT as a dense backbone (:mod:`zoo.contract`): the maps of the stages in ``out_indices``, at strides
    ``stride * 2**i`` (8/16/32 for patch 16; 7/14/28 for pit_b's patch 14), with each stage's prefix tokens 'b p d'
    for a DPT readout. The default (0, 0, 1, 2) gives every stage and the first twice: the four levels a DPT neck
    resamples to strides 4/8/16/32 (x2, x1, x1, x1).

    The patch embedding (patch 2s, stride s, no padding) gives a first map one row and column short of H/s x W/s
    (27x27 at 224); it is moved onto the stride grid by :func:`to_stride_grid` so that ``out_strides`` holds. The
    pooled stages are exact: ceil((H/s - 1) / 2) = H/2s for H a multiple of 2s. Stages after the last tap are
    dropped.
    """

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        if self.patch_size != 2 * self.stride:
            raise ValueError(f"the PiT backbone's strides hold for patch_size == 2 * stride (timm's models), got "
                             f"patch_size {self.patch_size} and stride {self.stride}")
        strides = [self.stride * 2 ** i for i in range(len(self.stages))]
        select_taps(self, out_indices, (0, 0, 1, 2), self.stages, self.dims, strides, 'stage')

    def forward_taps(self, x: torch.Tensor) -> Taps:
        outputs = self.forward_stages(x)
        maps = [to_stride_grid(outputs[i][0]) if i == 0 else outputs[i][0] for i in self.out_indices]
        return Taps(maps, [outputs[i][1] for i in self.out_indices])


PIT = {'backbone': PiTBackbone, 'classifier': PiTClassifier}
PIT_SIZES = {
    'ti': dict(patch_size=16, stride=8, base_dims=(32, 32, 32), depths=(2, 6, 4), num_heads=(2, 4, 8)),
    'xs': dict(patch_size=16, stride=8, base_dims=(48, 48, 48), depths=(2, 6, 4), num_heads=(2, 4, 8)),
    's': dict(patch_size=16, stride=8, base_dims=(48, 48, 48), depths=(2, 6, 4), num_heads=(3, 6, 12)),
    'b': dict(patch_size=14, stride=7, base_dims=(64, 64, 64), depths=(3, 6, 4), num_heads=(4, 8, 16)),
}
for _size, _kwargs in PIT_SIZES.items():
    register_variant(f'pit_{_size}_224', PIT, **_kwargs)
    register_variant(f'pit_{_size}_distilled_224', PIT, distilled=True, **_kwargs)
