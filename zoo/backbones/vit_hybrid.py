"""ViT-hybrid (Dosovitskiy et al. 2021, DPT-Hybrid of Ranftl et al. 2021): a BiT ResNet stem whose last stage,
projected by a 1x1 conv, is the patch-token grid of a ViT.

The ResNet is BiT's as timm's ``vit_base_r50_s16_*`` (and transformers' ``BitBackbone`` with
``layer_type='bottleneck'``) build it for the hybrids: weight-standardised convs (eps 1e-8) with TensorFlow 'SAME'
padding, GroupNorm(32) + ReLU, a 7x7/2 stem and a 'SAME' 3x3/2 max pool, then post-activation bottleneck stages
(stride on the 3x3 conv, a conv + norm shortcut in each stage's first block), strides 4, 8, 16 for R50's three
stages. Keys follow timm's (``patch_embed.backbone.stem.conv``, ``patch_embed.backbone.stages.0.blocks.0.conv1``,
``patch_embed.proj``), so timm checkpoints load with the ViT's converter.

As a dense backbone it taps *levels*: the ResNet stages 0..S-1 followed by the transformer blocks S..S+depth-1.
The default, DPT-Hybrid's, is stages 0 and 1 (strides 4 and 8, no prefix tokens) and the last two of the ViT's
four evenly spaced blocks (8 and 11 of 12, stride 16, with their CLS token).
"""
from __future__ import annotations

from collections import OrderedDict
from functools import partial

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import MaxPool2dSame, StdConv2d
from ..core.grid import TokenGrid
from ..registry import HALF_MEAN, HALF_STD, register_variant
from .common import tap_indices
from .inputs import check_images
from .vit import VIT_SIZES, ViTClassifier, ViTEncoder, default_taps


class GroupNormAct(nn.GroupNorm):
    """GroupNorm, then ReLU unless ``act=False``."""

    def __init__(self, num_groups: int, channels: int, act: bool = True, eps: float = 1e-5):
        super().__init__(num_groups, channels, eps=eps)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = super().forward(x)
        return F.relu(x, inplace=True) if self.act else x


class Bottleneck(nn.Module):
    """relu(norm3(conv3(norm2(conv2(norm1(conv1(x)))))) + shortcut(x)): 1x1 -> 3x3 (stride) -> 1x1 at a quarter of
    the output width, norms 1 and 2 with ReLU; the shortcut a strided 1x1 conv + norm when ``downsample``."""

    def __init__(self, in_chs: int, out_chs: int, stride: int, num_groups: int, eps: float, downsample: bool):
        super().__init__()
        mid = out_chs // 4
        conv, norm = partial(StdConv2d, eps=eps), partial(GroupNormAct, num_groups)
        self.downsample = nn.Sequential(OrderedDict(conv=conv(in_chs, out_chs, 1, stride=stride),
                                                    norm=norm(out_chs, act=False))) if downsample else None
        self.conv1, self.norm1 = conv(in_chs, mid, 1), norm(mid)
        self.conv2, self.norm2 = conv(mid, mid, 3, stride=stride), norm(mid)
        self.conv3, self.norm3 = conv(mid, out_chs, 1), norm(out_chs, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        x = self.norm2(self.conv2(self.norm1(self.conv1(x))))
        return F.relu(self.norm3(self.conv3(x)) + shortcut, inplace=True)


class ResNetStage(nn.Module):
    """``depth`` bottlenecks, the first one strided and with a projection shortcut."""

    def __init__(self, in_chs: int, out_chs: int, stride: int, depth: int, num_groups: int, eps: float):
        super().__init__()
        self.blocks = nn.Sequential(*[Bottleneck(in_chs if i == 0 else out_chs, out_chs, stride if i == 0 else 1,
                                                 num_groups, eps, downsample=i == 0) for i in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class BiTResNet(nn.Module):
    """'b c H W' -> one map per stage, stage i 'b channels[i] (H / 4 2^i) (W / 4 2^i)' (ceil for other sizes)."""

    def __init__(self, in_chans: int = 3, layers=(3, 4, 9), channels=(256, 512, 1024), stem_chs: int = 64,
                 num_groups: int = 32, eps: float = 1e-8):
        super().__init__()
        if not layers or len(layers) != len(channels):
            raise ValueError(f"layers {list(layers)} and channels {list(channels)} need one entry per ResNet stage")
        widths = [stem_chs, *channels, *(c // 4 for c in channels)]
        if any(c % 4 for c in channels) or any(w % num_groups for w in widths):
            raise ValueError(f"stem_chs {stem_chs}, channels {list(channels)} and their quarters (the bottleneck "
                             f"widths) must be divisible by num_groups {num_groups} (GroupNorm)")
        self.stem = nn.Sequential(OrderedDict(conv=StdConv2d(in_chans, stem_chs, 7, stride=2, eps=eps),
                                              norm=GroupNormAct(num_groups, stem_chs), pool=MaxPool2dSame(3, 2)))
        ins = [stem_chs, *channels[:-1]]
        self.stages = nn.ModuleList(ResNetStage(i, o, 1 if s == 0 else 2, d, num_groups, eps)
                                    for s, (i, o, d) in enumerate(zip(ins, channels, layers)))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        maps, x = [], self.stem(x)
        for stage in self.stages:
            x = stage(x)
            maps.append(x)
        return maps


class HybridPatchEmbed(nn.Module):
    """'b c H W' -> the ResNet's stage maps, and patch tokens 'b (h w) d' from a 1x1 conv of the last one."""

    def __init__(self, resnet: BiTResNet, channels: int, embed_dim: int):
        super().__init__()
        self.backbone = resnet
        self.proj = nn.Conv2d(channels, embed_dim, 1)

    def forward(self, x: torch.Tensor):
        """Tokens 'b (h w) d', their grid (h, w), and the stage maps."""
        maps = self.backbone(x)
        x = self.proj(maps[-1])
        return rearrange(x, 'b d h w -> b (h w) d'), (x.shape[-2], x.shape[-1]), maps


class ViTHybridEncoder(ViTEncoder):
    """:class:`zoo.backbones.vit.ViTEncoder` on tokens from a BiT ResNet (module docstring); ``layers``,
    ``channels``, ``stem_chs``, ``num_groups`` and ``std_eps`` describe the ResNet, the token stride (``patch_size``
    of the ViT) follows from its stage count: 4 * 2^(stages - 1)."""

    def __init__(self, layers=(3, 4, 9), channels=(256, 512, 1024), stem_chs: int = 64, num_groups: int = 32,
                 std_eps: float = 1e-8, **kwargs):
        if 'patch_size' in kwargs:
            raise TypeError("a ViT-hybrid has no patch_size option: its token stride is the ResNet's, "
                            "4 * 2^(len(layers) - 1)")
        super().__init__(patch_size=4 * 2 ** (len(layers) - 1), **kwargs)
        resnet = BiTResNet(self.in_chans, layers, channels, stem_chs, num_groups, std_eps)
        self.patch_embed = HybridPatchEmbed(resnet, channels[-1], self.embed_dim)
        self.stage_channels = list(channels)

    def embed_stages(self, x: torch.Tensor):
        """'b c H W' -> tokens 'b (p + h w) d' with positions, their grid (h, w), and the ResNet's stage maps."""
        check_images(self, x)
        x, grid, maps = self.patch_embed(x)
        return self.add_prefix_and_positions(x, grid), TokenGrid(grid), maps

    def embed(self, x: torch.Tensor):
        x, grid, _ = self.embed_stages(x)
        return x, grid


class ViTHybridClassifier(ViTClassifier, ViTHybridEncoder):
    """The ViT classifier (final norm, pooling, head) on the hybrid encoder."""


class ViTHybridBackbone(ViTHybridEncoder, Backbone):
    """Maps of the tapped levels (module docstring): ResNet stage maps (no prefix tokens) and token maps 'b d h w'
    of blocks (before the final norm, with their prefix tokens). Blocks after the last tapped one are dropped."""

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        stages = len(self.stage_channels)
        default = (0, 1) + tuple(stages + b for b in default_taps(self.depth)[-2:])
        taps = tap_indices(out_indices, default, stages + self.depth, 'level (ResNet stages, then blocks)',
                           distinct=True)
        self.out_indices = taps
        self.stage_taps = [t for t in taps if t < stages]
        self.block_taps = [t - stages for t in taps if t >= stages]
        del self.blocks[(self.block_taps[-1] + 1 if self.block_taps else 0):]
        self.out_channels = [self.stage_channels[t] if t < stages else self.embed_dim for t in taps]
        self.out_strides = [4 * 2 ** t if t < stages else self.patch_size for t in taps]
        self.input_multiple = self.patch_size

    @property
    def prefix_taps(self) -> list[bool]:
        return [False] * len(self.stage_taps) + [bool(self.num_prefix_tokens)] * len(self.block_taps)

    def forward_taps(self, x: torch.Tensor) -> Taps:
        """Stage maps, then block maps 'b d h w'; prefix tokens 'b p d' of the block taps (None for stage taps),
        or None without prefix tokens."""
        x, grid, maps = self.embed_stages(x)
        _, tapped = self.run_blocks(x, grid, taps=self.block_taps)
        p = self.num_prefix_tokens
        token_maps = [rearrange(t[:, p:], 'b (h w) d -> b d h w', h=grid[0]) for t in tapped]
        prefix = [None] * len(self.stage_taps) + [t[:, :p] for t in tapped] if p else None
        return Taps([maps[i] for i in self.stage_taps] + token_maps, prefix)


VIT_HYBRID = {'backbone': ViTHybridBackbone, 'classifier': ViTHybridClassifier}
for _res in (224, 384):  # timm's R50 + ViT-B/16 hybrids; its 224 weights are ImageNet-21k features (no head)
    register_variant(f'vit_base_r50_s16_{_res}', VIT_HYBRID, mean=HALF_MEAN, std=HALF_STD, input_size=_res,
                     num_classes=0 if _res == 224 else 1000,
                     layers=(3, 4, 9), **VIT_SIZES['base'])
