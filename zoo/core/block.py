"""The transformer block shared by every token backbone."""
from __future__ import annotations

from functools import partial

import torch
from torch import nn

from .attention import Attention
from .execution import Checkpointable
from .layers import DropPath, LayerScale, Mlp

LayerNorm6 = partial(nn.LayerNorm, eps=1e-6)


class Block(Checkpointable):
    """Attention and MLP residual branches with DropPath and optional LayerScale.

    pre-LN (default):  x = x + attn(norm1(x));  x = x + mlp(norm2(x))
    post-LN:           x = norm1(x + attn(x));  x = norm2(x + mlp(x))
    residual post-LN:  x = x + norm1(attn(x));  x = x + norm2(mlp(x))   (Swin V2)
    ``norm_placement`` picks one: 'pre', 'post' or 'res_post' (``post_norm=True`` is 'post').
    ``attn`` may be any :class:`Attention` (custom q/k/v projection, scale, position bias). Recomputed in
    backward when ``grad_checkpointing`` is set (:func:`zoo.core.set_grad_checkpointing`). ``gated_mlp``: a GLU MLP
    (SwiGLU with ``act_layer=nn.SiLU``; :class:`zoo.core.Mlp` ``gated``), hidden width ``dim * mlp_ratio``.
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, *, qkv_bias: bool = True,
                 attn: nn.Module | None = None, norm_layer=LayerNorm6, act_layer=nn.GELU, drop: float = 0.0,
                 attn_drop: float = 0.0, drop_path: float = 0.0, init_values: float | None = None,
                 post_norm: bool = False, norm_placement: str | None = None, gated_mlp: bool = False):
        super().__init__()
        placement = norm_placement or ('post' if post_norm else 'pre')
        if placement not in ('pre', 'post', 'res_post'):
            raise ValueError(f"norm_placement must be 'pre', 'post' or 'res_post', got {norm_placement!r}")
        self.post_norm = placement == 'post'
        self.res_post_norm = placement == 'res_post'
        self.norm1 = norm_layer(dim)
        self.attn = attn if attn is not None else Attention(
            dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop)
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer=act_layer, drop=drop, gated=gated_mlp)
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path else nn.Identity()

    def _forward(self, x: torch.Tensor, grid=None, mask=None, return_attn: bool = False):
        """x: 'b n c' -> 'b n c' (and the attention weights 'b heads n n' with ``return_attn``)."""
        x, attn = self._attention_residual(x, grid, mask, return_attn)
        if self.post_norm:
            x = self.norm2(x + self.drop_path2(self.ls2(self.mlp(x))))
        elif self.res_post_norm:
            x = x + self.drop_path2(self.ls2(self.norm2(self.mlp(x))))
        else:
            x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return (x, attn) if return_attn else x

    def _attention_residual(self, x, grid, mask, return_attn):
        # A function of its own so that the branch output is freed before the MLP runs.
        unnormed = self.post_norm or self.res_post_norm
        out = self.attn(x if unnormed else self.norm1(x), grid=grid, mask=mask, return_attn=return_attn)
        out, attn = out if return_attn else (out, None)
        x = x + self.drop_path1(self.ls1(self.norm1(out) if self.res_post_norm else out))
        return (self.norm1(x) if self.post_norm else x), attn
