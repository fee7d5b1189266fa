"""LeViT (Graham et al. 2021, "a Vision Transformer in ConvNet's Clothing"): a transformer made multi-scale by
attention downsampling, with a ConvNet's habits.

- a stem of four 3x3 stride-2 conv + BN (hard-swish between them) to stride 16;
- BatchNorm instead of LayerNorm: every Linear is a :class:`zoo.core.LinearBN` (folded into one Linear in eval),
  there is no pre-norm, and residual branches end in a BN initialised to zero;
- attention (the shared :class:`zoo.core.Attention`): keys of ``key_dim`` per head, values ``attn_ratio`` times
  wider (:class:`zoo.core.SplitQKV`), a learned per-head bias indexed by the offset magnitudes (|dy|, |dx|)
  (:class:`zoo.core.AbsOffsetBias`, resampled to each input's grid, so any size works: timm fixes it at build
  time), and an output projection of hard-swish then a BN'd Linear;
- between stages, attention downsampling: the queries are the tokens of every other row and column, keys and
  values all tokens (:class:`zoo.core.StridedQueryQKV`), with no residual around it, then an MLP residual;
- MLPs: BN'd Linear, hard-swish, BN'd Linear; the classifier averages the tokens into a BN'd Linear head and a
  distillation head, whose logits it averages in evaluation (both in training, as DeiT).

Numerically timm's ``Levit``/``LevitDistilled`` (linear form; the ``levit_conv_*`` names are the same model and
load timm's 1x1-conv form) given the same weights. Keys: ``stem.{0..3}.{conv,norm}``,
``stages.{i}.downsample.{attn,mlp}``, ``stages.{i}.blocks.{j}.{attn,mlp}`` with ``attn.qkv.proj`` (or
``attn.qkv.q``/``kv``), ``attn.pos_bias.table``, ``attn.proj.ln``, ``mlp.ln1``/``ln2``, then ``head``,
``head_dist``; :mod:`zoo.weights` converts timm's layout (q/k/v rows regrouped from per-head to per-part).
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import (
    AbsOffsetBias,
    Attention,
    BNLinear,
    Checkpointable,
    ConvBN,
    DropPath,
    LinearBN,
    SplitQKV,
    StridedQueryQKV,
    activate,
)
from ..registry import register_variant
from .common import check_drop_path_rate, pair, run_blocks, run_stages, select_taps
from .inputs import check_images

LEVIT_ACTIVATIONS = {'hard_swish': nn.Hardswish, 'silu': nn.SiLU}


def levit_activation(name: str) -> type[nn.Module]:
    if name not in LEVIT_ACTIVATIONS:
        raise ValueError(f"unknown LeViT activation {name!r}; choose one of {', '.join(LEVIT_ACTIVATIONS)}")
    return LEVIT_ACTIVATIONS[name]


def stem16(in_chans: int, dim: int, act_layer) -> nn.Sequential:
    """'b c H W -> b d H/16 W/16': four 3x3 stride-2 conv + BN, widths d/8, d/4, d/2, d, activations between."""
    widths = [in_chans, dim // 8, dim // 4, dim // 2, dim]
    return nn.Sequential(*(ConvBN(widths[i], widths[i + 1], 3, stride=2, act_layer=act_layer if i < 3 else None)
                           for i in range(4)))


class OutputProjection(nn.Module):
    """'b m v -> b m d': activation, then a BN'd Linear (keys ``act``, ``ln``)."""

    def __init__(self, in_dim: int, out_dim: int, act_layer, bn_weight_init: float):
        super().__init__()
        self.act = act_layer()
        self.ln = LinearBN(in_dim, out_dim, bn_weight_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(activate(self.act, x))


def levit_attention(dim: int, key_dim: int, num_heads: int, attn_ratio: float, grid, act_layer,
                    stride: int = 1, out_dim: int | None = None) -> Attention:
    """The core Attention with LeViT's parts; ``stride`` 2 is attention downsampling (queries on the strided grid)."""
    kq, v = key_dim * num_heads, int(attn_ratio * key_dim) * num_heads
    if stride == 1:
        qkv = SplitQKV(LinearBN(dim, 2 * kq + v), (kq, kq, v))
    else:
        qkv = StridedQueryQKV(LinearBN(dim, kq), LinearBN(dim, kq + v), (kq, v), stride=stride)
    # values wider than keys: the attention takes its explicit path (SDPA's fused CPU kernels do not take them)
    return Attention(dim, num_heads, qkv=qkv, scale=key_dim ** -0.5, pos_bias=AbsOffsetBias(grid, num_heads, stride),
                     proj=OutputProjection(v, out_dim or dim, act_layer, 0.0 if stride == 1 else 1.0))


class LeViTMlp(nn.Module):
    """'b n d -> b n d': BN'd Linear, activation, BN'd Linear (its BN starting at zero)."""

    def __init__(self, dim: int, hidden_dim: int, act_layer):
        super().__init__()
        self.ln1 = LinearBN(dim, hidden_dim)
        self.act = act_layer()
        self.ln2 = LinearBN(hidden_dim, dim, bn_weight_init=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln2(activate(self.act, self.ln1(x)))


class LeViTBlock(Checkpointable):
    """x + attn(x), then + mlp(x) on 'b (h w) d' (no norms: the BNs are inside the Linears).

    With ``downsample`` the attention is strided and widens the tokens, and there is no residual around it:
    'b (h w) c -> b (h/2 w/2) d'.
    """

    def __init__(self, dim: int, out_dim: int, key_dim: int, num_heads: int, attn_ratio: float, mlp_ratio: float,
                 grid, act_layer, downsample: bool = False, drop_path: float = 0.0):
        super().__init__()
        self.downsample = downsample
        self.attn = levit_attention(dim, key_dim, num_heads, attn_ratio, grid, act_layer,
                                    stride=2 if downsample else 1, out_dim=out_dim)
        self.drop_path1 = DropPath(drop_path) if drop_path and not downsample else nn.Identity()
        self.mlp = LeViTMlp(out_dim, int(out_dim * mlp_ratio), act_layer)
        self.drop_path2 = DropPath(drop_path) if drop_path else nn.Identity()

    def _forward(self, x: torch.Tensor, grid):
        out = self.attn(x, grid=grid)
        x = out if self.downsample else x + self.drop_path1(out)
        return x + self.drop_path2(self.mlp(x))


class LeViTStage(nn.Module):
    """Optional attention downsampling (x0.5, widening), then blocks; returns the tokens and their grid."""

    def __init__(self, in_dim: int, dim: int, depth: int, key_dim: int, num_heads: int, attn_ratio: float,
                 mlp_ratio: float, grid, act_layer, downsample: bool, drop_path: float):
        super().__init__()
        self.downsample = None
        if downsample:  # timm: in_dim // key_dim heads, values 4x the keys, MLP ratio 2
            self.downsample = LeViTBlock(in_dim, dim, key_dim, in_dim // key_dim, 4.0, 2.0, grid, act_layer,
                                         downsample=True, drop_path=drop_path)
            grid = tuple((g - 1) // 2 + 1 for g in grid)
        self.blocks = nn.ModuleList(LeViTBlock(dim, dim, key_dim, num_heads, attn_ratio, mlp_ratio, grid, act_layer,
                                               drop_path=drop_path) for _ in range(depth))

    def forward(self, x: torch.Tensor, grid):
        if self.downsample is not None:
            x = self.downsample(x, grid)
            grid = self.downsample.attn.qkv.query_grid(grid)
        return run_blocks(self.blocks, x, grid), grid


class LeViTEncoder(nn.Module):
    """Stem and stages; ``forward_stages`` gives each stage's tokens 'b (h w) d' and grid."""
    family = 'levit'
    classifier_only = ('head.', 'head_dist.')
    stem_stride = 16

    def __init__(self, img_size: int | tuple[int, int] = 224, in_chans: int = 3, embed_dims=(128, 256, 384),
                 key_dim: int = 16, num_heads=(4, 6, 8), depths=(2, 3, 4), attn_ratio: float = 2.0,
                 mlp_ratio: float = 2.0, act: str = 'hard_swish', drop_path_rate: float = 0.0):
        super().__init__()
        if not len(embed_dims) == len(depths) == len(num_heads):
            raise ValueError(f"embed_dims {embed_dims}, depths {depths} and num_heads {num_heads} need one entry per "
                             f"stage")
        act_layer = levit_activation(act)
        self.in_chans, self.dims = in_chans, list(embed_dims)
        self.stem = stem16(in_chans, self.dims[0], act_layer)
        grid = tuple(s // self.stem_stride for s in pair(img_size))  # the build grid of the bias tables (timm's)
        stages, in_dim = [], self.dims[0]
        for i, (dim, depth, heads) in enumerate(zip(self.dims, depths, num_heads)):
            stages.append(LeViTStage(in_dim, dim, depth, key_dim, heads, attn_ratio, mlp_ratio, grid, act_layer,
                                     downsample=i > 0, drop_path=check_drop_path_rate(drop_path_rate)))
            grid = grid if i == 0 else tuple((g - 1) // 2 + 1 for g in grid)
            in_dim = dim
        self.stages = nn.ModuleList(stages)
        self.strides = [self.stem_stride * 2 ** i for i in range(len(self.dims))]

    @property
    def min_input_size(self) -> int:
        """The smallest input side: the stem's map is then 1x1 (and so is every later one)."""
        return 1

    def forward_stages(self, x: torch.Tensor) -> list[tuple[torch.Tensor, tuple[int, int]]]:
        """Per stage: tokens 'b (h w) d' and the grid (h, w)."""
        check_images(self, x)
        # the stem runs channels-last: oneDNN's convolutions take that layout directly (a 3-channel NCHW input costs
        # the first one a layout conversion and a slower kernel), and its map is then the dense tokens, a view
        fmap = self.stem(x.contiguous(memory_format=torch.channels_last))
        grid = tuple(fmap.shape[-2:])
        x = rearrange(fmap, 'b d h w -> b (h w) d').contiguous()  # dense tokens: every Linear one matmul
        return run_stages(self.stages, x, grid)


class LeViTClassifier(LeViTEncoder):
    """Mean of the last stage's tokens, BN'd Linear ``head`` and ``head_dist``: in training both logits, in
    evaluation their mean (timm's LevitDistilled)."""

    def __init__(self, num_classes: int = 1000, drop_rate: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.head = BNLinear(self.dims[-1], num_classes, drop_rate) if num_classes else nn.Identity()
        self.head_dist = BNLinear(self.dims[-1], num_classes, drop_rate) if num_classes else nn.Identity()

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """'b c H W -> b d': the mean of the last stage's tokens."""
        return self.forward_stages(x)[-1][0].mean(dim=1)

    def forward(self, x: torch.Tensor):
        features = self.forward_features(x)
        cls, dist = self.head(features), self.head_dist(features)
        return (cls, dist) if self.training else (cls + dist) / 2


class LeViTBackbone(LeViTEncoder, Backbone):
    """LeViT as a dense backbone (:mod:`zoo.contract`): the maps of the stages in ``out_indices`` at strides 16, 32,
    64 (exact for sides that are multiples of 64: each stride-2 step takes ceil(h / 2)). The default (0, 0, 1, 2)
    gives every stage and the first twice: the four levels a DPT neck resamples to strides 4/8/16/32 (x4, x2, x2,
    x2). No prefix tokens. Stages after the last tap are dropped."""

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        select_taps(self, out_indices, (0, 0, 1, 2), self.stages, self.dims, self.strides, 'stage')

    def forward_taps(self, x: torch.Tensor) -> Taps:
        outputs = self.forward_stages(x)
        maps = []
        for i in self.out_indices:
            tokens, (h, w) = outputs[i]
            maps.append(rearrange(tokens, 'b (h w) d -> b d h w', h=h, w=w))
        return Taps(maps, None)


LEVIT = {'backbone': LeViTBackbone, 'classifier': LeViTClassifier}
LEVIT_SIZES = {
    '128s': dict(embed_dims=(128, 256, 384), key_dim=16, num_heads=(4, 6, 8), depths=(2, 3, 4)),
    '128': dict(embed_dims=(128, 256, 384), key_dim=16, num_heads=(4, 8, 12), depths=(4, 4, 4)),
    '192': dict(embed_dims=(192, 288, 384), key_dim=32, num_heads=(3, 5, 6), depths=(4, 4, 4)),
    '256': dict(embed_dims=(256, 384, 512), key_dim=32, num_heads=(4, 6, 8), depths=(4, 4, 4)),
    '384': dict(embed_dims=(384, 512, 768), key_dim=32, num_heads=(6, 9, 12), depths=(4, 4, 4)),
}
for _size, _kwargs in LEVIT_SIZES.items():
    register_variant(f'levit_{_size}', LEVIT, **_kwargs)
    register_variant(f'levit_conv_{_size}', LEVIT, **_kwargs)  # the same model; timm's 1x1-conv layout loads into it
