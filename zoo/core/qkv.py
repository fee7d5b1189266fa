"""q/k/v projections, the pluggable front of :class:`zoo.core.attention.Attention`.

Each takes tokens 'b n c' (and the grid, for the parts that need it) and returns q 'b m c', k 'b n c', v 'b n c':
m = n, but for :class:`SeparateQKV` built with ``num_queries`` (the first m tokens ask), :class:`ProbeQKV` (m
probe tokens ask the n tokens after them: k and v 'b (n - m) c'),
:class:`StridedQueryQKV` (the tokens of a subgrid ask) and :class:`SeparateInputsQKV` (q, k and v each from tokens
of its own).
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from .conv_bn import ConvBN
from .linear import Linear


class FusedQKV(Linear):
    """q, k and v from one Linear (in_dim -> 3 dim), laid out [q | k | v] as in timm's ``attn.qkv``."""

    def __init__(self, dim: int, bias: bool = True, in_dim: int | None = None):
        super().__init__(in_dim or dim, 3 * dim, bias=bias)

    def forward(self, x: torch.Tensor, grid=None):
        return super().forward(x).chunk(3, dim=-1)


class SeparateQKV(nn.Module):
    """q, k and v from three Linears; with ``num_queries`` m only the first m tokens are projected to q (CrossViT's
    CLS cross-attention, attention pooling: m = 1)."""

    def __init__(self, dim: int, bias: bool = True, num_queries: int | None = None):
        super().__init__()
        self.num_queries = num_queries
        self.q = nn.Linear(dim, dim, bias=bias)
        self.k = nn.Linear(dim, dim, bias=bias)
        self.v = nn.Linear(dim, dim, bias=bias)

    def forward(self, x: torch.Tensor, grid=None):
        queries = x if self.num_queries is None else x[:, :self.num_queries]
        return self.q(queries), self.k(x), self.v(x)

    def extra_repr(self) -> str:
        return '' if self.num_queries is None else f"num_queries={self.num_queries}"


class ProbeQKV(nn.Module):
    """Learned probes asking the tokens (SigLIP's MAP head, timm's ``AttentionPoolLatent``): x is 'b (m + n) c' with
    the m probe tokens first; q projects the probes (``q``), k and v the n tokens only, from one Linear laid out
    [k | v] (``kv``). Unlike :class:`SeparateQKV` with ``num_queries``, the probes are not among the keys."""

    def __init__(self, dim: int, bias: bool = True, num_queries: int = 1):
        super().__init__()
        self.num_queries = num_queries
        self.q = nn.Linear(dim, dim, bias=bias)
        self.kv = nn.Linear(dim, 2 * dim, bias=bias)

    def forward(self, x: torch.Tensor, grid=None):
        m = self.num_queries
        k, v = self.kv(x[:, m:]).chunk(2, dim=-1)
        return self.q(x[:, :m]), k, v

    def extra_repr(self) -> str:
        return f"num_queries={self.num_queries}"


class ConvQKV(SeparateQKV):
    """CvT's projection: per q/k/v a depthwise conv + BatchNorm on the token grid, then a Linear.

    x is 'b (p + h w) c' with ``num_prefix`` leading tokens (CvT's CLS) that skip the convs and are put
    back in front of each conv output before the Linears. q keeps the grid (``stride_q`` 1); k and v are
    subsampled (``stride_kv`` 2): q 'b (p + h w) c', k and v 'b (p + h/2 w/2) c'.
    """

    def __init__(self, dim: int, bias: bool = True, kernel_size: int = 3, stride_q: int = 1, stride_kv: int = 2,
                 num_prefix: int = 0):
        super().__init__(dim, bias=bias)
        self.num_prefix = num_prefix
        self.conv_q = ConvBN(dim, kernel_size=kernel_size, stride=stride_q, depthwise=True)
        self.conv_k = ConvBN(dim, kernel_size=kernel_size, stride=stride_kv, depthwise=True)
        self.conv_v = ConvBN(dim, kernel_size=kernel_size, stride=stride_kv, depthwise=True)

    def forward(self, x: torch.Tensor, grid=None):
        if grid is None:
            raise ValueError("ConvQKV needs the token grid (h, w)")
        p = self.num_prefix
        prefix = x[:, :p]
        # channels-last strides (a view when there is no prefix): the convs' outputs flatten back to tokens
        # without a copy, and with a prefix the grid is made dense once here rather than by each conv
        fmap = rearrange(x[:, p:], 'b (h w) c -> b c h w', h=grid[0], w=grid[1])
        fmap = fmap.contiguous(memory_format=torch.channels_last)
        q = self._project(self.conv_q, self.q, fmap, prefix)
        k = self._project(self.conv_k, self.k, fmap, prefix)
        v = self._project(self.conv_v, self.v, fmap, prefix)
        return q, k, v

    @staticmethod
    def _project(conv: nn.Module, linear: nn.Linear, fmap: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
        tokens = rearrange(conv(fmap), 'b c h w -> b (h w) c')
        if prefix.shape[1]:
            tokens = torch.cat([prefix, tokens], dim=1)
        return linear(tokens)


class QVBiasQKV(Linear):
    """q, k and v from one Linear without bias, then learned ``q_bias`` and ``v_bias`` and no key bias (BEiT, EVA,
    Swin V2, timm's RoPE ViTs): the fused weight is timm's ``attn.qkv.weight``, the biases its ``attn.q_bias`` /
    ``attn.v_bias``. Without rotary positions a k bias cannot change the softmax; with them it could, so these
    models have none."""

    def __init__(self, dim: int, in_dim: int | None = None):
        super().__init__(in_dim or dim, 3 * dim, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))

    def linear_bias(self) -> torch.Tensor:
        """[q_bias | 0 | v_bias]."""
        return torch.cat([self.q_bias, torch.zeros_like(self.q_bias), self.v_bias])

    def forward(self, x: torch.Tensor, grid=None):
        return super().forward(x).chunk(3, dim=-1)


class SplitQKV(nn.Module):
    """q, k and v from one projection laid out [q | k | v] with ``widths`` (wq, wk, wv): values may be wider than
    queries and keys (LeViT). ``proj`` is any module 'b n c -> b n (wq + wk + wv)' (a Linear, a BN'd Linear)."""

    def __init__(self, proj: nn.Module, widths: tuple[int, int, int]):
        super().__init__()
        self.proj = proj
        self.widths = tuple(widths)

    def forward(self, x: torch.Tensor, grid=None):
        return self.proj(x).split(self.widths, dim=-1)


class StridedQueryQKV(nn.Module):
    """Attention downsampling (LeViT): the queries are the tokens on every ``stride``-th row and column of the grid,
    the keys and values all tokens, so the attention's output lies on the strided grid.

    x 'b (h w) c' -> q 'b (h' w') wq', k 'b (h w) wk', v 'b (h w) wv', with h' = ceil(h / stride) (rows 0, s, 2s, ...).
    ``q`` projects the subsampled tokens; ``kv`` projects all tokens, laid out [k | v] with ``kv_widths``. Where
    CrossViT's query subset is the first m tokens (:class:`SeparateQKV` ``num_queries``), this one is a subgrid.
    """

    def __init__(self, q: nn.Module, kv: nn.Module, kv_widths: tuple[int, int], stride: int = 2):
        super().__init__()
        self.q, self.kv = q, kv
        self.kv_widths = tuple(kv_widths)
        self.stride = stride

    def query_grid(self, grid) -> tuple[int, int]:
        """The grid of the queries (and of the attention output) for the token grid (h, w): ceil(h / stride), written
        as torch writes the size of the strided slice ``[::stride]`` ((h - 1) // stride + 1), so that a traced
        (symbolic) grid is the same expression as the tokens' own size: written as -(-h // stride), torch.export
        could not prove the two equal, and the reshape to this grid computed w as (h' w') // h', an expression
        that an export traced at a square size could fold to the traced shape."""
        return (grid[0] - 1) // self.stride + 1, (grid[1] - 1) // self.stride + 1

    def forward(self, x: torch.Tensor, grid=None):
        if grid is None:
            raise ValueError("StridedQueryQKV needs the token grid (h, w)")
        s = self.stride
        queries = rearrange(x, 'b (h w) c -> b h w c', h=grid[0], w=grid[1])[:, ::s, ::s]
        k, v = self.kv(x).split(self.kv_widths, dim=-1)
        return self.q(queries.flatten(1, 2)), k, v


class SeparateInputsQKV(SeparateQKV):
    """q, k and v each from tokens of its own (DETR-style attention, Mask2Former's decoder: positions added to the
    queries and keys but not to the values): x is 'b (m + n + n) c', the m query inputs, then the n key inputs, then
    the n value inputs; three Linears ``q``, ``k``, ``v`` project them. m is ``num_queries``; n follows from x.
    Self-attention passes [t + pos, t + pos, t] (m = n), cross-attention [queries + pos, memory + pos, memory]."""

    def __init__(self, dim: int, num_queries: int, bias: bool = True):
        super().__init__(dim, bias=bias, num_queries=num_queries)  # SeparateQKV's Linears q, k, v

    def forward(self, x: torch.Tensor, grid=None):
        m = self.num_queries
        n, odd = (x.shape[1] - m) // 2, (x.shape[1] - m) % 2  # not divmod: a traced token count is a SymInt
        if odd or n < 1:
            raise ValueError(f"SeparateInputsQKV takes 'b (m + n + n) c' tokens with m = {m} queries, got "
                             f"{x.shape[1]} tokens: pass the queries, then the keys, then as many values")
        return self.q(x[:, :m]), self.k(x[:, m:m + n]), self.v(x[:, m + n:])

    def extra_repr(self) -> str:
        return f"num_queries={self.num_queries}"
