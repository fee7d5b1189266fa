"""Attention weights of a running model, read from the core's explicit path, and attention rollout.

:func:`record_attention` makes every :class:`~zoo.core.Attention` of a model also compute its softmax weights
(the explicit ``softmax(q k^T * scale + bias)`` path, ``return_attn=True``) while the model runs unchanged, and
records them with the token layout they belong to. Nothing in the backbones is specific to this: any family
built on the core (ViT, DeiT, CvT, CoAtNet, CrossViT, Swin) is covered.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from einops import rearrange
from torch import nn

from .core import Attention
from .core.grid import Grid


@dataclass
class AttentionMap:
    """One attention call: ``weights`` 'b heads m n' (m queries, n keys), the first ``num_prefix`` tokens of the
    keys (and of the queries, for self-attention) being CLS/distillation/register tokens, the rest the spatial
    tokens of ``key_grid`` (h, w) in row-major order."""

    name: str
    weights: torch.Tensor
    num_prefix: int
    key_grid: Grid
    query_grid: Grid | None  # None: the queries are a subset (cross-attention of the CLS token)

    @property
    def is_self_attention(self) -> bool:
        return self.query_grid is not None

    def from_query(self, query: int) -> torch.Tensor:
        """The weights query token ``query`` gives the spatial keys: 'b heads h w'."""
        row = self.weights[:, :, query, self.num_prefix:]
        return rearrange(row, 'b heads (h w) -> b heads h w', h=self.key_grid[0])

    def query_index(self, y: float, x: float) -> int:
        """The query token at relative position (y, x) in [0, 1) of the image (self-attention only)."""
        if self.query_grid is None:
            raise ValueError(f"{self.name} has no spatial queries (only its prefix token asks)")
        h, w = self.query_grid
        return self.num_prefix + min(int(y * h), h - 1) * w + min(int(x * w), w - 1)


def token_layout(num_tokens: int, size: Grid, prefixes=range(9)) -> tuple[int, Grid]:
    """``(num_prefix, (h, w))`` of a token sequence on a grid derived from ``size`` (an image, or a finer token
    grid): the first of ``prefixes`` for which the rest of the tokens is ``size`` at some stride (rounding up or
    down)."""
    height, width = size
    for prefix in prefixes:
        spatial = num_tokens - prefix
        for stride in range(1, max(height, width) + 1):
            for grid in ((math.ceil(height / stride), math.ceil(width / stride)), (height // stride, width // stride)):
                if grid[0] * grid[1] == spatial and min(grid) > 0:
                    return prefix, grid
    raise ValueError(f"{num_tokens} tokens are not a grid derived from {size} plus {list(prefixes)} prefix tokens")


@contextmanager
def record_attention(model: nn.Module, image_size: Grid):
    """Within the block, each call of an :class:`Attention` inside ``model`` appends an :class:`AttentionMap` to
    the yielded list (in call order, weights detached). ``image_size`` (h, w) of the input lets the token
    layouts be recovered where a backbone does not pass its grid."""
    maps: list[AttentionMap] = []
    asked: list[bool] = []

    def before(module, args, kwargs):
        asked.append(bool(kwargs.get('return_attn', False)))
        return args, {**kwargs, 'return_attn': True}

    def after(module, args, kwargs, output):
        out, weights = output
        m, n = weights.shape[-2:]
        grid = kwargs.get('grid')
        if grid is not None:  # self-attention over a known grid (a query subset is asked without one)
            query_grid = tuple(grid)
            prefix = m - query_grid[0] * query_grid[1]
            key_grid = query_grid if n == m else token_layout(n, query_grid, (prefix,))[1]  # CvT: k, v subsampled
        else:  # a query subset (CrossViT's CLS cross-attention): keys laid out from the image
            query_grid = None
            prefix, key_grid = token_layout(n, image_size)
        maps.append(AttentionMap(module_names[module], weights.detach(), prefix, key_grid, query_grid))
        return output if asked.pop() else out

    module_names = {m: name for name, m in model.named_modules() if isinstance(m, Attention)}
    handles = [h for m in module_names for h in (m.register_forward_pre_hook(before, with_kwargs=True),
                                                  m.register_forward_hook(after, with_kwargs=True))]
    try:
        yield maps
    finally:
        for handle in handles:
            handle.remove()


def rollout(maps: list[AttentionMap], residual: float = 0.5) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, 2020) through consecutive self-attention layers over one token set:
    each layer's head-averaged weights mixed with the identity for the residual path,
    ``A' = (1 - residual) A + residual I`` with rows renormalised, multiplied from the first layer to the last.
    Returns 'b n n': how much each output token draws on each input token."""
    if not maps:
        raise ValueError("rollout needs at least one attention map")
    shapes = {tuple(m.weights.shape[-2:]) for m in maps}
    one_square_token_set = len(shapes) == 1 and all(q == k for q, k in shapes)
    if not one_square_token_set or not all(m.is_self_attention for m in maps):
        raise ValueError(f"rollout needs self-attention over one token set; these layers have "
                         f"{[tuple(m.weights.shape[-2:]) for m in maps]} (query, key) tokens")
    n = maps[0].weights.shape[-1]
    eye = torch.eye(n, dtype=maps[0].weights.dtype, device=maps[0].weights.device)
    result = None
    for m in maps:
        mixed = (1 - residual) * m.weights.mean(dim=1) + residual * eye  # b n n
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        result = mixed if result is None else mixed @ result
    return result
