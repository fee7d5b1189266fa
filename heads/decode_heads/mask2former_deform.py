"""Multi-scale deformable attention (Deformable DETR, Zhu et al. 2021) in plain PyTorch: each query reads a few
bilinearly sampled points per head and level (``F.grid_sample``), no compiled kernel; Mask2Former's pixel decoder.

Per query: ``sampling_offsets`` gives, per head H, level L and point P, an offset (in cells of that level) from the
query's reference point (x, y in [0, 1] of the image), ``attention_weights`` a softmax over the L * P samples of each
head; the output is the weighted sum of the sampled values, then ``output_proj``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def reference_points(shapes, device, dtype) -> torch.Tensor:
    """The centre of every cell of every level, (x, y) in [0, 1]: '(sum h w) 2', levels in ``shapes`` order."""
    points = []
    for h, w in shapes:
        y = (torch.arange(h, device=device, dtype=dtype) + 0.5) / h
        x = (torch.arange(w, device=device, dtype=dtype) + 0.5) / w
        points.append(torch.stack(torch.broadcast_tensors(x[None, :], y[:, None]), -1).flatten(0, 1))  # (h w) 2
    return torch.cat(points)


class MultiScaleDeformableAttention(nn.Module):
    """'b q c' queries sampling 'b n c' values laid out as the levels ``shapes`` [(h, w), ...] flattened and joined
    (n = sum h w): ``forward(query, reference, value, shapes)`` with ``reference`` 'q 2' (x, y in [0, 1])."""

    def __init__(self, dim: int, num_heads: int = 8, num_levels: int = 3, num_points: int = 4):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"deformable attention width {dim} is not divisible by num_heads={num_heads}")
        self.num_heads, self.num_levels, self.num_points = num_heads, num_levels, num_points
        self.sampling_offsets = nn.Linear(dim, num_heads * num_levels * num_points * 2)
        self.attention_weights = nn.Linear(dim, num_heads * num_levels * num_points)
        self.value_proj = nn.Linear(dim, dim)
        self.output_proj = nn.Linear(dim, dim)

    def forward(self, query: torch.Tensor, reference: torch.Tensor, value: torch.Tensor, shapes) -> torch.Tensor:
        heads, levels = self.num_heads, self.num_levels
        if len(shapes) != levels or sum(h * w for h, w in shapes) != value.shape[1]:
            raise ValueError(f"deformable attention over {levels} levels got shapes {list(shapes)} for "
                             f"{value.shape[1]} value tokens")
        value = rearrange(self.value_proj(value), 'b n (m d) -> b m d n', m=heads)
        offsets = rearrange(self.sampling_offsets(query), 'b q (m l p t) -> b m l q p t', m=heads, l=levels, t=2)
        weights = self.attention_weights(query).unflatten(-1, (heads, -1)).softmax(-1)  # b q m (l p)
        weights = rearrange(weights, 'b q m (l p) -> l (b m) p q', l=levels)
        cells = torch.tensor([[w, h] for h, w in shapes], dtype=query.dtype, device=query.device)  # l 2: (x, y)
        # sampling points in grid_sample's [-1, 1]: 2 (reference + offset / cells) - 1; points before queries, so
        # that each point's samples are one contiguous 'n d q' slice
        grid = rearrange(2 * (reference[:, None] + offsets / cells[:, None, None]) - 1, 'b m l q p t -> l (b m) p q t')
        out, start = None, 0
        for level, (h, w) in enumerate(shapes):
            v = rearrange(value[..., start:start + h * w], 'b m d (h w) -> (b m) d h w', h=h)
            start += h * w
            sampled = F.grid_sample(v, grid[level], mode='bilinear', padding_mode='zeros',
                                    align_corners=False)  # (b m) d p q
            for point in range(sampled.shape[2]):  # out += sample * weight, one fused pass per point
                term = sampled[:, :, point], weights[level][:, None, point]
                out = term[0] * term[1] if out is None else out.addcmul_(*term)
        return self.output_proj(rearrange(out, '(b m) d q -> b q (m d)', m=heads))
