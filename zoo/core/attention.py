"""Multi-head attention: the one token mixer every backbone is composed from.

Attention keeps one idea, softmax(q k^T * scale + bias) v in heads; a family's own idea is a part passed in:
- ``qkv``: the projection giving q, k, v from the tokens (:mod:`zoo.core.qkv`): one fused Linear
  (ViT/DeiT, the default), separate Linears (CrossViT, HF layouts; with ``num_queries`` only the first tokens ask,
  CrossViT's CLS cross-attention and attention pooling), a conv projection (CvT), keys narrower than values (LeViT);
- ``scale``: the softmax scale, ``(dim // num_heads) ** -0.5`` unless given (CvT: ``dim ** -0.5``; LeViT: its
  key width ``key_dim ** -0.5``);
- ``pos_bias``: an optional module mapping the token grid to an additive (heads, n_q, n_k) bias
  (relative position bias, resized to the grid of the input);
- ``rope``: an optional module turning q and k by their grid positions (:mod:`zoo.core.rope`);
- ``proj``: the output projection, ``Linear(dim, dim)`` unless given (CoAtNet: to the next stage's width;
  LeViT: hard-swish, then a BN'd Linear).
A similarity other than the scaled dot product is a mixin overriding :meth:`Attention.similarity` (Swin V2's
cosine similarity, :class:`zoo.core.similarity.CosineSimilarity`): its learned temperature is then a parameter of
the attention itself, ``attn.logit_scale``, where checkpoints keep it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .grid import Grid
from .qkv import FusedQKV
from .weight_decay import NoWeightDecay


class Attention(NoWeightDecay, nn.Module):
    """Multi-head scaled dot-product attention with an SDPA path and an explicit path.

    ``forward(x, grid=None, mask=None, return_attn=False)``:
      x     'b n c' tokens;
      grid  (h, w) of the spatial tokens, for projections and biases that need it;
      mask  bool (True = may attend) or additive float, broadcastable to 'b heads m n';
      return_attn  use the explicit path and also return the softmax weights 'b heads m n'.
    The queries are the ones the ``qkv`` part gives (m of them; m = n unless it asks with a subset).
    SDPA unless ``fused`` is off (:func:`zoo.core.set_fused_attention`) or the value heads are not as wide as the
    key heads (LeViT): SDPA's fused CPU kernels do not take those and its math fallback is slower than the
    explicit path.
    """
    fused = True

    def __init__(self, dim: int, num_heads: int = 8, *, qkv: nn.Module | None = None, scale: float | None = None,
                 pos_bias: nn.Module | None = None, rope: nn.Module | None = None, proj: nn.Module | None = None,
                 attn_drop: float = 0.0, proj_drop: float = 0.0):
        super().__init__()
        if (qkv is None or scale is None) and dim % num_heads:
            raise ValueError(f"attention width {dim} is not divisible by num_heads={num_heads}; give the qkv "
                             f"part and the scale when the heads do not split the width")
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5 if scale is None else scale
        self.qkv = FusedQKV(dim) if qkv is None else qkv
        self.pos_bias = pos_bias
        self.rope = rope
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim) if proj is None else proj
        self.proj_drop = nn.Dropout(proj_drop) if proj_drop else nn.Identity()

    def forward(self, x: torch.Tensor, grid: Grid | None = None, mask: torch.Tensor | None = None,
                return_attn: bool = False):
        q, k, v = self.qkv(x, grid=grid)
        # 'b n (h d) -> b h n d' for each of q (m queries), k, v (n keys)
        q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.num_heads) for t in (q, k, v))
        if self.rope is not None:
            q, k = self.rope(q, k, grid)
        q, k, scale = self.similarity(q, k)
        bias = self._bias(mask, grid, q.dtype)
        drop = self.attn_drop if self.training else 0.0
        if return_attn or not self.fused or v.shape[-1] != k.shape[-1]:
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

    def similarity(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(q, k, scale) whose scaled dot product q . k * scale are the logits: the dot product and ``scale``."""
        return q, k, self.scale

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
