"""The transformer block shared by every token backbone."""
from __future__ import annotations

from functools import partial

import torch
from torch import nn

from .attention import Attention
from .execution import Checkpointable
from .layers import DropPath, LayerScale, Mlp
from .qkv import FusedQKV

LayerNorm6 = partial(nn.LayerNorm, eps=1e-6)
NORM_PLACEMENTS = ('pre', 'post', 'res_post')


class Block(Checkpointable):
    """Attention and MLP residual branches with DropPath and optional LayerScale, built from its parts.

    ``attn``: any :class:`Attention` (its q/k/v projection, scale, position bias, rotary positions and output
    projection are its own parts); ``mlp``: any module 'b n c -> b n c' (an :class:`zoo.core.Mlp`, gated or with a
    ``norm`` part); :func:`vit_parts` makes the plain ViT's pair. ``norm_layer``: the class of the two norms;
    ``init_values``: LayerScale's initial value (None: no LayerScale). ``norm_placement`` (one of
    :data:`NORM_PLACEMENTS`):
    'pre' (default):   x = x + attn(norm1(x));  x = x + mlp(norm2(x))
    'post':            x = norm1(x + attn(x));  x = norm2(x + mlp(x))
    'res_post':        x = x + norm1(attn(x));  x = x + norm2(mlp(x))   (Swin V2)
    Recomputed in backward when ``grad_checkpointing`` is set (:func:`zoo.core.set_grad_checkpointing`).
    """

    def __init__(self, dim: int, attn: nn.Module, mlp: nn.Module, *, norm_layer=LayerNorm6, drop_path: float = 0.0,
                 init_values: float | None = None, norm_placement: str = 'pre'):
        super().__init__()
        if norm_placement not in NORM_PLACEMENTS:
            raise ValueError(f"norm_placement must be one of {', '.join(map(repr, NORM_PLACEMENTS))}, "
                             f"got {norm_placement!r}")
        self.norm_placement = norm_placement
        self.norm1 = norm_layer(dim)
        self.attn = attn
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = mlp
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path else nn.Identity()

    def _forward(self, x: torch.Tensor, grid=None, mask: torch.Tensor | None = None, return_attn: bool = False):
        """x: 'b n c' -> 'b n c' (and the attention weights 'b heads n n' with ``return_attn``). ``mask``, when given,
        goes to the attention as it is (:class:`zoo.core.Attention`'s: bool, True = may attend, or additive float,
        broadcastable to 'b heads n n': EoMT's queries attend only inside their predicted masks, NaFlex's padding
        is attended by nothing); Swin's shifted windows merge it with the mask of their shift regions."""
        x, attn = self._attention_residual(x, grid, return_attn, mask)
        if self.norm_placement == 'post':
            x = self.norm2(x + self.drop_path2(self.ls2(self.mlp(x))))
        elif self.norm_placement == 'res_post':
            x = x + self.drop_path2(self.ls2(self.norm2(self.mlp(x))))
        else:
            x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return (x, attn) if return_attn else x

    def _attention_residual(self, x, grid, return_attn, mask=None):
        # A function of its own so that the branch output is freed before the MLP runs.
        placement = self.norm_placement
        out = self.attn(self.norm1(x) if placement == 'pre' else x, grid=grid, mask=mask, return_attn=return_attn)
        out, attn = out if return_attn else (out, None)
        x = x + self.drop_path1(self.ls1(self.norm1(out) if placement == 'res_post' else out))
        return (self.norm1(x) if placement == 'post' else x), attn


def vit_parts(dim: int, num_heads: int, mlp_ratio: float = 4.0, *, qkv_bias: bool = True, act_layer=nn.GELU,
              drop: float = 0.0, attn_drop: float = 0.0, gated: bool = False) -> dict[str, nn.Module]:
    """The plain ViT block's parts, made in this order: ``attn``, an :class:`Attention` with one fused q/k/v Linear
    (timm's ``attn.qkv``), and ``mlp``, an :class:`zoo.core.Mlp` of hidden width ``dim * mlp_ratio`` (``gated``:
    GLU, SwiGLU with ``act_layer=nn.SiLU``). ``Block(dim, **vit_parts(dim, heads), ...)``."""
    attn = Attention(dim, num_heads, qkv=FusedQKV(dim, bias=qkv_bias), attn_drop=attn_drop, proj_drop=drop)
    return dict(attn=attn, mlp=Mlp(dim, int(dim * mlp_ratio), act_layer=act_layer, drop=drop, gated=gated))
