"""Mask2Former's masked-attention transformer decoder, class head and mask MLP (Cheng et al. 2022).

``num_queries`` learned queries (content ``query_feat``, position ``query_pos``) pass ``num_layers`` post-norm layers,
each: masked cross-attention to one level of the pixel decoder (levels in turn, coarsest first; keys carry the
level's sine positions, values do not) -> self-attention among the queries -> ReLU FFN. All attention is the core's
:class:`zoo.core.Attention` with :class:`zoo.core.SeparateInputsQKV` (queries, keys and values from tokens of their
own). Before the first layer and after each, the normed queries give class logits 'b q (c+1)' (``class_head``) and
mask logits 'b q H/4 W/4' (``mask_embed`` MLP dotted with the mask features); the mask logits, resized bilinearly to
the next layer's level, give its attention mask: a query may attend where sigmoid(logit) >= 0.5, and a query allowed
nowhere is allowed everywhere.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from zoo.core import Attention, Mlp, SeparateInputsQKV

from ..registry import MODELS
from .mask2former_pixel_decoder import sine_positions


def allowed_positions(mask_logits: torch.Tensor, size) -> torch.Tensor:
    """Masked attention's mask: mask logits 'b q H W' resized (bilinear) to ``size`` (h, w) -> bool 'b 1 q (h w)',
    True where sigmoid(logit) >= 0.5; a query allowed nowhere is allowed everywhere."""
    resized = F.interpolate(mask_logits, size=tuple(size), mode='bilinear', align_corners=False)
    allowed = (resized.sigmoid() >= 0.5).flatten(2)[:, None]
    return allowed | ~allowed.any(-1, keepdim=True)


class MaskedAttentionLayer(nn.Module):
    """x 'b q c' queries: x = norm(x + cross(x + query_pos -> keys, memory; allowed)); x = norm(x + self(x + query_pos,
    x + query_pos, x)); x = norm(x + ffn(x)). ``keys`` 'b n c' are the memory plus its positions; ``allowed`` bool
    'b 1 q n' (True = may attend)."""

    def __init__(self, dim: int, num_heads: int, num_queries: int, ffn_dim: int, dropout: float = 0.0):
        super().__init__()
        self.cross_attn = Attention(dim, num_heads, qkv=SeparateInputsQKV(dim, num_queries), attn_drop=dropout,
                                    proj_drop=dropout)
        self.cross_norm = nn.LayerNorm(dim)
        self.self_attn = Attention(dim, num_heads, qkv=SeparateInputsQKV(dim, num_queries), attn_drop=dropout,
                                   proj_drop=dropout)
        self.self_norm = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, ffn_dim, act_layer=nn.ReLU, drop=dropout)
        self.mlp_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, query_pos: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor,
                allowed: torch.Tensor | None) -> torch.Tensor:
        x = self.cross_norm(x + self.cross_attn(torch.cat([x + query_pos, keys, memory], 1), mask=allowed))
        q = x + query_pos
        x = self.self_norm(x + self.self_attn(torch.cat([q, q, x], 1)))
        return self.mlp_norm(x + self.mlp(x))


@MODELS.register_module()
class Mask2FormerTransformerDecoder(nn.Module):
    """(levels: ``num_levels`` maps 'b in_channels h w' coarsest first, mask features 'b mask_channels H W') ->
    one (class logits 'b q (num_classes + 1)', mask logits 'b q H W') per layer plus one before the first layer
    (``num_layers + 1`` in all, the last the model's output). The last class is "no object"."""

    def __init__(self, num_classes: int, in_channels: int = 256, channels: int = 256, mask_channels: int = 256,
                 num_queries: int = 100, num_layers: int = 9, num_heads: int = 8, ffn_channels: int = 2048,
                 num_levels: int = 3, input_proj: bool = False, dropout: float = 0.0):
        super().__init__()
        self.num_levels = num_levels
        self.input_proj = nn.ModuleList(nn.Conv2d(in_channels, channels, 1) if input_proj or in_channels != channels
                                        else nn.Identity() for _ in range(num_levels))
        self.level_embed = nn.Parameter(torch.randn(num_levels, channels))
        self.query_feat = nn.Parameter(torch.randn(num_queries, channels))
        self.query_pos = nn.Parameter(torch.randn(num_queries, channels))
        self.layers = nn.ModuleList(MaskedAttentionLayer(channels, num_heads, num_queries, ffn_channels, dropout)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(channels)
        self.class_head = nn.Linear(channels, num_classes + 1)
        self.mask_embed = nn.Sequential(nn.Linear(channels, channels), nn.ReLU(), nn.Linear(channels, channels),
                                        nn.ReLU(), nn.Linear(channels, mask_channels))

    def predict(self, x: torch.Tensor, mask_features: torch.Tensor, attn_size=None):
        """(class logits 'b q k', mask logits 'b q H W', the next layer's mask 'b 1 q (h w)' at ``attn_size`` or
        None)."""
        x = self.norm(x)
        masks = torch.einsum('bqc,bchw->bqhw', self.mask_embed(x), mask_features)
        allowed = None if attn_size is None else allowed_positions(masks, attn_size)
        return self.class_head(x), masks, allowed

    def forward(self, levels: list[torch.Tensor], mask_features: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
        shapes = [tuple(m.shape[-2:]) for m in levels]
        memory = [rearrange(proj(m), 'b c h w -> b (h w) c') + embed
                  for proj, m, embed in zip(self.input_proj, levels, self.level_embed)]
        pos = [sine_positions(h, w, self.query_feat.shape[-1], mask_features.device, mask_features.dtype)[None]
               for h, w in shapes]  # 1 (h w) c
        keys = [m + p for m, p in zip(memory, pos)]  # b (h w) c, the same for every layer reading the level
        b = mask_features.shape[0]
        x = self.query_feat.expand(b, -1, -1)
        query_pos = self.query_pos.expand(b, -1, -1)
        *out, allowed = self.predict(x, mask_features, shapes[0] if self.layers else None)
        outputs = [tuple(out)]
        for i, layer in enumerate(self.layers):
            level = i % self.num_levels
            x = layer(x, query_pos, keys[level], memory[level], allowed)
            last = i == len(self.layers) - 1
            *out, allowed = self.predict(x, mask_features, None if last else shapes[(i + 1) % self.num_levels])
            outputs.append(tuple(out))
        return outputs
