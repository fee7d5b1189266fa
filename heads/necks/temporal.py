"""Temporal attention over a clip's frames (Video Depth Anything, Chen et al. 2025, after AnimateDiff's motion
module): each pixel of a feature map attends to the same pixel in the clip's other frames.

:class:`TemporalModule` maps x '(b t) c h w' to the same shape: x + proj_out(blocks(proj_in(GroupNorm(x)))) with the
tokens of the blocks '(b h w) t c'. A :class:`TemporalBlock` runs ``attentions`` temporal attentions,
h = h + Attention(LayerNorm(h) + pe) (pe: the sin-cos table of the frame index, :func:`zoo.core.sincos_1d`, added to
the attention's input only), then a GEGLU MLP, h = h + Mlp(LayerNorm(h)). The attention is the core
:class:`zoo.core.Attention` (q/k/v without biases) over the frame axis; ``proj_out`` starts at zero, so that a
pretrained image model's outputs are unchanged before training.

Streaming (the authors' ``video_depth_stream``): given a :class:`TemporalCache`, the frames of a forward are new
frames that follow cached ones. Each attention's keys and values are then over the cached frames' attention inputs
(LayerNorm(h), before the positions) followed by the new frames', the positions numbered over that whole sequence,
and only the new frames ask (:class:`FrameQKV`); the cache records the new frames' attention inputs, from which a
later forward's context is made (:class:`heads.models.video_stream.VideoDepthStream` keeps the window of them).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from einops import rearrange
from torch import nn

from zoo.core import Attention, FusedQKV, Mlp, sincos_1d


class FrameQKV(FusedQKV):
    """q, k and v of frames 'b n c' from one fused Linear (:class:`zoo.core.FusedQKV`, its ``qkv.weight``); with
    ``grid=(n, m)`` only the last m frames ask (q 'b m c'; k and v over all n): new frames after cached ones."""

    def forward(self, x: torch.Tensor, grid=None):
        q, k, v = super().forward(x)
        if grid is None:
            return q, k, v
        n, m = grid
        if x.shape[1] != n or not 0 < m <= n:
            raise ValueError(f"FrameQKV: the last m of n frames ask, grid=(n, m); got grid {tuple(grid)} for "
                             f"{x.shape[1]} frames")
        return q[:, n - m:], k, v


class TemporalCache:
    """What a streaming forward's temporal attentions attend besides its own frames, and what they record.

    ``context``: per temporal attention, in the order the model runs them, the attention inputs (LayerNorm(h), before
    the positions) of the cached frames '(b h w) n c'; None: no frames before. Each attention of the forward takes its
    entry as keys and values before its own frames' and appends its own frames' inputs '(b h w) m c' to ``states``:
    after the forward, ``states`` is what this forward adds to the cache (one entry per attention)."""

    def __init__(self, context: Sequence[torch.Tensor] | None = None):
        self.context = None if context is None else list(context)
        self.states: list[torch.Tensor] = []

    def extend(self, x: torch.Tensor) -> torch.Tensor:
        """Records ``x`` '(b h w) m c' (the next attention's input of the new frames); returns that attention's
        sequence '(b h w) (n + m) c': its cached frames, then ``x``."""
        i = len(self.states)
        self.states.append(x)
        if self.context is None:
            return x
        if i >= len(self.context):
            raise ValueError(f"a cache of {len(self.context)} attentions' frames for a model with more temporal "
                             f"attentions: build the context from this model's states")
        return torch.cat([self.context[i], x], dim=1)


class TemporalBlock(nn.Module):
    """``attentions`` pre-norm temporal attentions with frame positions, then a pre-norm GEGLU MLP (module
    docstring); ``forward(x '(b h w) t c', cache=None)``, at most ``max_frames`` frames (with a cache: cached and new
    together)."""

    def __init__(self, dim: int, num_heads: int = 8, attentions: int = 2, max_frames: int = 32, mlp_ratio: int = 4):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(attentions))
        self.attns = nn.ModuleList(Attention(dim, num_heads, qkv=FrameQKV(dim, bias=False)) for _ in range(attentions))
        self.ff_norm = nn.LayerNorm(dim)
        self.ff = Mlp(dim, dim * mlp_ratio, gated=True)  # GELU(gate) * value: GEGLU
        self.register_buffer('pe', sincos_1d(max_frames, dim)[None], persistent=False)  # 1 t c

    def forward(self, x: torch.Tensor, cache: TemporalCache | None = None) -> torch.Tensor:
        for norm, attn in zip(self.norms, self.attns):
            h = norm(x)
            seq = h if cache is None else cache.extend(h)  # '(b h w) n c': the cached frames, then x's
            n, m = seq.shape[1], h.shape[1]
            if n > self.pe.shape[1]:
                raise ValueError(f"a clip of {n} frames{f' ({n - m} cached)' if n > m else ''}: this temporal "
                                 f"attention was built for at most {self.pe.shape[1]} (max_frames)")
            x = x + attn(seq + self.pe[:, :n].to(seq.dtype), grid=(n, m) if n > m else None)
        return x + self.ff(self.ff_norm(x))


class TemporalModule(nn.Module):
    """Temporal attention on a feature map of a batch of clips (module docstring): ``forward(x '(b t) c h w',
    frames=t, cache=None)`` (with a :class:`TemporalCache`: t new frames after its cached ones). ``depth`` blocks of
    ``attentions`` attentions each, ``num_heads`` heads, GroupNorm of ``groups``."""

    def __init__(self, channels: int, num_heads: int = 8, depth: int = 1, attentions: int = 2, groups: int = 32,
                 max_frames: int = 32):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.proj_in = nn.Linear(channels, channels)
        self.blocks = nn.ModuleList(TemporalBlock(channels, num_heads, attentions, max_frames) for _ in range(depth))
        self.proj_out = nn.Linear(channels, channels)
        nn.init.zeros_(self.proj_out.weight)
        nn.init.zeros_(self.proj_out.bias)

    def forward(self, x: torch.Tensor, frames: int, cache: TemporalCache | None = None) -> torch.Tensor:
        if x.shape[0] % frames:
            raise ValueError(f"a batch of {x.shape[0]} frames is not whole clips of {frames}")
        h, w = x.shape[-2:]
        y = self.proj_in(rearrange(self.norm(x), '(b t) c h w -> (b h w) t c', t=frames))
        for block in self.blocks:
            y = block(y, cache)
        return x + rearrange(self.proj_out(y), '(b h w) t c -> (b t) c h w', h=h, w=w)
