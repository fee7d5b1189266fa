"""Mask2Former's pixel decoder (Cheng et al. 2022): multi-scale deformable-attention encoder + one FPN step.

The ``num_levels`` coarsest backbone maps (strides 8, 16, 32 for a 4-level pyramid) are projected to ``channels``
(1x1 conv + GroupNorm), flattened and joined, and refined by ``num_layers`` post-norm encoder layers, each a
multi-scale deformable self-attention (:mod:`.mask2former_deform`; queries carry the sine positions plus a learned
embedding per level) and a ReLU FFN. The finer maps (stride 4 down to ``common_stride``) join FPN-style: lateral 1x1
conv + GroupNorm plus the bilinearly upsampled coarser output, then a 3x3 conv + GroupNorm + ReLU. ``mask_proj``
(1x1 conv) turns the finest into the mask features 'b m H/4 W/4'.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from zoo.core import Mlp

from ..registry import MODELS
from .mask2former_deform import MultiScaleDeformableAttention, reference_points


def sine_positions(h: int, w: int, dim: int, device=None, dtype=torch.float32, temperature: float = 10000.0):
    """DETR's normalised sine positions of an h x w grid: '(h w) dim', the y half first, then x; each half pairs
    sin(p / t^(2k / half)) and cos(p / t^(2k / half)) for k = 0, 1, ..., with p = 2 pi i / (h + 1e-6), i = 1..h (x
    likewise with w)."""
    if dim % 4:
        raise ValueError(f"sine positions need a width divisible by 4, got {dim}")
    half = dim // 2
    freq = temperature ** (2 * (torch.arange(half, device=device) // 2).float() / half)  # half

    def embed(n: int) -> torch.Tensor:  # n half: sin on even channels, cos on odd (in float32, then ``dtype``)
        p = torch.arange(1, n + 1, device=device, dtype=torch.float32) / (n + 1e-6) * (2 * math.pi)
        angles = p[:, None] / freq
        return torch.stack((angles[:, 0::2].sin(), angles[:, 1::2].cos()), -1).flatten(1).to(dtype)

    y, x = embed(h), embed(w)
    return torch.cat([y[:, None].expand(h, w, half), x[None].expand(h, w, half)], -1).flatten(0, 1)


def conv_gn(in_channels: int, out_channels: int, kernel_size: int, bias: bool, relu: bool = False) -> nn.Sequential:
    layers = [nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=bias),
              nn.GroupNorm(32, out_channels)]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


class DeformableEncoderLayer(nn.Module):
    """Post-norm: x = norm1(x + attn(x + pos -> x)); x = norm2(x + ffn(x)). x 'b n c', n = sum of the levels' h w."""

    def __init__(self, dim: int, num_heads: int, num_levels: int, num_points: int, ffn_dim: int,
                 dropout: float = 0.0):
        super().__init__()
        self.attn = MultiScaleDeformableAttention(dim, num_heads, num_levels, num_points)
        self.norm1 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, ffn_dim, act_layer=nn.ReLU, drop=dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x: torch.Tensor, pos: torch.Tensor, reference: torch.Tensor, shapes) -> torch.Tensor:
        x = self.norm1(x + self.drop(self.attn(x + pos, reference, x, shapes)))
        return self.norm2(x + self.mlp(x))


@MODELS.register_module()
class Mask2FormerPixelDecoder(nn.Module):
    """Backbone maps (finest first, strides ``in_strides``) -> (mask features 'b mask_channels H/s W/s' at the
    finest FPN stride s = ``common_stride``, the ``num_levels`` encoded maps 'b channels h w', coarsest first)."""

    def __init__(self, in_channels, in_strides, channels: int = 256, mask_channels: int = 256, num_layers: int = 6,
                 num_heads: int = 8, num_points: int = 4, ffn_channels: int = 1024, num_levels: int = 3,
                 common_stride: int = 4, dropout: float = 0.0):
        super().__init__()
        in_channels, in_strides = list(in_channels), list(in_strides)
        if len(in_channels) < num_levels or in_strides != sorted(set(in_strides)):
            raise ValueError(f"Mask2FormerPixelDecoder needs at least num_levels={num_levels} maps at increasing "
                             f"strides, got strides {in_strides}; give a plain backbone a feature pyramid neck")
        if channels % 32:
            raise ValueError(f"Mask2FormerPixelDecoder channels must be a multiple of 32 (GroupNorm(32)), got "
                             f"{channels}")
        self.num_levels = num_levels
        self.input_proj = nn.ModuleList(conv_gn(c, channels, 1, bias=True) for c in in_channels[-num_levels:][::-1])
        self.level_embed = nn.Parameter(torch.randn(num_levels, channels))
        self.layers = nn.ModuleList(DeformableEncoderLayer(channels, num_heads, num_levels, num_points, ffn_channels,
                                                           dropout) for _ in range(num_layers))
        # FPN steps below the encoded levels, down to common_stride (one for strides 4..32 and common_stride 4)
        steps = int(math.log2(in_strides[-num_levels]) - math.log2(common_stride))
        if steps > len(in_channels) - num_levels:
            raise ValueError(f"Mask2FormerPixelDecoder: common_stride {common_stride} needs maps down to that stride, "
                             f"got strides {in_strides}")
        self.lateral = nn.ModuleList(conv_gn(c, channels, 1, bias=False) for c in in_channels[:steps])
        self.output = nn.ModuleList(conv_gn(channels, channels, 3, bias=False, relu=True) for _ in range(steps))
        self.mask_proj = nn.Conv2d(channels, mask_channels, 1)
        self.out_channels = channels
        self.init_weights()

    def init_weights(self) -> None:
        """Deformable DETR's start: zero offset weights, biases pointing each head a different way (k-th point
        k cells out), uniform attention; Xavier value and output projections."""
        for layer in self.layers:
            attn = layer.attn
            nn.init.zeros_(attn.sampling_offsets.weight)
            angle = torch.arange(attn.num_heads) * (2 * math.pi / attn.num_heads)
            ways = torch.stack([angle.cos(), angle.sin()], -1)
            ways = ways / ways.abs().amax(-1, keepdim=True)  # m 2, on the unit square
            steps = torch.arange(1, attn.num_points + 1, dtype=ways.dtype)
            bias = ways[:, None, None] * steps[None, None, :, None]  # m 1 p 2
            attn.sampling_offsets.bias.data.copy_(bias.expand(-1, attn.num_levels, -1, -1).flatten())
            nn.init.zeros_(attn.attention_weights.weight)
            nn.init.zeros_(attn.attention_weights.bias)
            for proj in (attn.value_proj, attn.output_proj):
                nn.init.xavier_uniform_(proj.weight)
                nn.init.zeros_(proj.bias)

    def forward(self, maps: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        levels = [proj(m) for proj, m in zip(self.input_proj, maps[-self.num_levels:][::-1])]  # coarsest first
        shapes = [tuple(m.shape[-2:]) for m in levels]
        x = torch.cat([rearrange(m, 'b c h w -> b (h w) c') for m in levels], 1)
        pos = torch.cat([sine_positions(h, w, x.shape[-1], x.device, x.dtype) + self.level_embed[i]
                         for i, (h, w) in enumerate(shapes)])[None]  # 1 n c
        reference = reference_points(shapes, x.device, x.dtype)  # n 2
        for layer in self.layers:
            x = layer(x, pos, reference, shapes)
        outs = [rearrange(t, 'b (h w) c -> b c h w', h=h, w=w)
                for t, (h, w) in zip(x.split([h * w for h, w in shapes], 1), shapes)]
        finest = outs[-1]
        for step in reversed(range(len(self.lateral))):  # coarser FPN steps first
            lateral = self.lateral[step](maps[step])
            finest = self.output[step](lateral + F.interpolate(finest, size=lateral.shape[-2:], mode='bilinear',
                                                               align_corners=False))
        return self.mask_proj(finest), outs
