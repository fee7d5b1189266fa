"""Temporal attention over a clip's frames (Video Depth Anything, Chen et al. 2025, after AnimateDiff's motion
module): each pixel of a feature map attends to the same pixel in the clip's other frames.

:class:`TemporalModule` maps x '(b t) c h w' to the same shape: x + proj_out(blocks(proj_in(GroupNorm(x)))) with the
tokens of the blocks '(b h w) t c'. A :class:`TemporalBlock` runs ``attentions`` temporal attentions,
h = h + Attention(LayerNorm(h) + pe) (pe: the sin-cos table of the frame index, :func:`zoo.core.sincos_1d`, added to
the attention's input only), then a GEGLU MLP, h = h + Mlp(LayerNorm(h)). The attention is the core
:class:`zoo.core.Attention` (q/k/v without biases) over the frame axis; ``proj_out`` starts at zero, so that a
pretrained image model's outputs are unchanged before training.
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from zoo.core import Attention, FusedQKV, Mlp, sincos_1d


class TemporalBlock(nn.Module):
    """``attentions`` pre-norm temporal attentions with frame positions, then a pre-norm GEGLU MLP (module
    docstring); ``forward(x '(b h w) t c')``, at most ``max_frames`` frames."""

    def __init__(self, dim: int, num_heads: int = 8, attentions: int = 2, max_frames: int = 32, mlp_ratio: int = 4):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(attentions))
        self.attns = nn.ModuleList(Attention(dim, num_heads, qkv=FusedQKV(dim, bias=False)) for _ in range(attentions))
        self.ff_norm = nn.LayerNorm(dim)
        self.ff = Mlp(dim, dim * mlp_ratio, gated=True)  # GELU(gate) * value: GEGLU
        self.register_buffer('pe', sincos_1d(max_frames, dim)[None], persistent=False)  # 1 t c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = x.shape[1]
        if frames > self.pe.shape[1]:
            raise ValueError(f"a clip of {frames} frames: this temporal attention was built for at most "
                             f"{self.pe.shape[1]} (max_frames)")
        pe = self.pe[:, :frames].to(x.dtype)
        for norm, attn in zip(self.norms, self.attns):
            x = x + attn(norm(x) + pe)
        return x + self.ff(self.ff_norm(x))


class TemporalModule(nn.Module):
    """Temporal attention on a feature map of a batch of clips (module docstring): ``forward(x '(b t) c h w',
    frames=t)``. ``depth`` blocks of ``attentions`` attentions each, ``num_heads`` heads, GroupNorm of ``groups``."""

    def __init__(self, channels: int, num_heads: int = 8, depth: int = 1, attentions: int = 2, groups: int = 32,
                 max_frames: int = 32):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.proj_in = nn.Linear(channels, channels)
        self.blocks = nn.ModuleList(TemporalBlock(channels, num_heads, attentions, max_frames) for _ in range(depth))
        self.proj_out = nn.Linear(channels, channels)
        nn.init.zeros_(self.proj_out.weight)
        nn.init.zeros_(self.proj_out.bias)

    def forward(self, x: torch.Tensor, frames: int) -> torch.Tensor:
        if x.shape[0] % frames:
            raise ValueError(f"a batch of {x.shape[0]} frames is not whole clips of {frames}")
        h, w = x.shape[-2:]
        y = self.proj_in(rearrange(self.norm(x), '(b t) c h w -> (b h w) t c', t=frames))
        for block in self.blocks:
            y = block(y)
        return x + rearrange(self.proj_out(y), '(b h w) t c -> (b t) c h w', h=h, w=w)
