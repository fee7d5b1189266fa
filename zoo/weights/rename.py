"""Key renaming by ordered regular-expression rules, and the offset-table layout change, shared by the layout
converters."""
from __future__ import annotations

import re

import torch
from einops import rearrange

from ..core.pos_embed import square_grid


def rename_keys(state: dict, rules: list[tuple[str, str]]) -> dict:
    """Every key rewritten by each ``(pattern, replacement)`` rule in turn (``re.sub``, first match only)."""
    compiled = [(re.compile(p), r) for p, r in rules]
    out = {}
    for key, value in state.items():
        for pattern, repl in compiled:
            key = pattern.sub(repl, key, count=1)
        out[key] = value
    return out


def heads_first_table(value: torch.Tensor) -> torch.Tensor:
    """A relative-position bias table '(dy dx) heads' (timm's and the official Swin/CoAtNet layout, square window:
    2n-1 offsets per side) -> 'heads dy dx' (:class:`zoo.core.RelPosBias`); other shapes are returned as they are."""
    if value.ndim != 2:
        return value
    return rearrange(value, '(dy dx) heads -> heads dy dx', dy=square_grid(value.shape[0])[0])
