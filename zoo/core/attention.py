"""Multi-head attention: the one token mixer every backbone is composed from.

Backbones differ only in the parts they plug in:
- ``qkv``: the projection giving q, k, v from the tokens (:mod:`zoo.core.qkv`): one fused Linear
  (ViT/DeiT), separate Linears (CrossViT, HF layouts), or a conv projection (CvT);
- ``scale``: the softmax scale, ``head_dim ** -0.5`` unless given (CvT uses ``dim ** -0.5``);
- ``pos_bias``: an optional module mapping the token grid to an additive (heads, n_q, n_k) bias
  (relative position bias, resized to the grid of the input);
- ``rope``: an optional module turning q and k by their grid positions (:mod:`zoo.core.rope`);
- ``num_queries`` at call time: only the first tokens ask (CrossViT's CLS cross-attention);
- ``similarity``: 'dot' (q . k * scale) or 'cosine' (Swin V2: cos(q, k) times a learned per-head
  ``logit_scale``, kept in log space and clamped at log(100) before exp, as the reference does);
- ``head_dim``: the per-head query/key width when it is not ``dim // num_heads`` (LeViT: its q/k/v projection
  gives keys narrower than values, and more heads than divide the width);
- ``proj``: the output projection, a Linear unless given (LeViT: hard-swish, then a BN'd Linear).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .grid import Grid
from .qkv import FusedQKV
from .weight_decay import NoWeightDecay


class Attention(NoWeightDecay, nn.Module):
    """Multi-head scaled dot-product attention with an SDPA path and an explicit path.

    ``forward(x, grid=None, mask=None, num_queries=None, return_attn=False)``:
      x     'b n c' tokens;
      grid  (h, w) of the spatial tokens, for projections and biases that need it;
      mask  bool (True = may attend) or additive float, broadcastable to 'b heads m n';
      num_queries  m: only x[:, :m] are queries (cross-attention with a query subset);
      return_attn  use the explicit path and also return the softmax weights 'b heads m n'.
    ``fused = False`` (:func:`zoo.core.set_fused_attention`) takes the explicit path always.
    """
    fused = True
    no_weight_decay_names = ('logit_scale',)  # cosine similarity's temperature (as timm), absent otherwise

    def __init__(self, dim: int, num_heads: int = 8, *, qkv_bias: bool = True, qkv: nn.Module | None = None,
                 scale: float | None = None, attn_drop: float = 0.0, proj_drop: float = 0.0,
                 pos_bias: nn.Module | None = None, out_dim: int | None = None, rope: nn.Module | None = None,
                 similarity: str = 'dot', head_dim: int | None = None, proj: nn.Module | None = None):
        super().__init__()
        if head_dim is None and dim % num_heads:
            raise ValueError(f"attention width {dim} is not divisible by num_heads={num_heads}")
        if similarity not in ('dot', 'cosine'):
            raise ValueError(f"similarity must be 'dot' or 'cosine', got {similarity!r}")
        self.similarity = similarity
        if similarity == 'cosine':  # per-head log of the logit scale, 'heads 1 1', initialised at log(10)
            self.logit_scale = nn.Parameter(torch.full((num_heads, 1, 1), math.log(10.0)))
        self.num_heads = num_heads
        self.head_dim = dim // num_heads if head_dim is None else head_dim
        self.scale = self.head_dim ** -0.5 if scale is None else scale
        self.qkv = FusedQKV(dim, bias=qkv_bias) if qkv is None else qkv
        self.pos_bias = pos_bias
        self.rope = rope
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, out_dim or dim) if proj is None else proj
        self.proj_drop = nn.Dropout(proj_drop) if proj_drop else nn.Identity()

    def forward(self, x: torch.Tensor, grid: Grid | None = None, mask: torch.Tensor | None = None,
                num_queries: int | None = None, return_attn: bool = False):
        q, k, v = self.qkv(x, grid=grid, num_queries=num_queries)
        # 'b n (h d) -> b h n d' for each of q (m queries), k, v (n keys)
        q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.num_heads) for t in (q, k, v))
        if self.rope is not None:
            q, k = self.rope(q, k, grid)
        scale = self.scale
        if self.similarity == 'cosine':  # cos(q, k) * exp(min(logit_scale, log 100)), the factor folded into q
            q = F.normalize(q, dim=-1) * self.logit_scale.clamp(max=math.log(100.0)).exp()
            k, scale = F.normalize(k, dim=-1), 1.0
        bias = self._bias(mask, grid, q.dtype)
        drop = self.attn_drop if self.training else 0.0
        if return_attn or not self.fused:
            scores = (q * scale) @ k.transpose(-2, -1)  # b h m n
            if bias is not None:
                scores = scores.masked_fill(~bias, float('-inf')) if bias.dtype == torch.bool else scores + bias
            attn = scores.softmax(dim=-1)
            out = F.dropout(attn, drop, self.training) @ v  # b h m d
        else:
            attn = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=drop, scale=scale)
        out = rearrange(out, 'b h m d -> b m (h d)')
        out = self.proj_drop(self.proj(out))
        return (out, attn) if return_attn else out

    def _bias(self, mask, grid, dtype):
        """The mask and the position bias merged into one attention bias (or None)."""
        if self.pos_bias is None:
            return mask
        bias = self.pos_bias(grid).to(dtype)[None]  # 1 h m n (4-D: CPU flash attention takes it)
        if mask is None:
            return bias
        if mask.dtype == torch.bool:
            return bias.masked_fill(~mask, float('-inf'))
        return bias + mask
