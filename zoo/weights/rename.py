"""Key renaming by ordered regular-expression rules, and the offset-table layout change, shared by the layout
converters."""
from __future__ import annotations

import math
import re

import torch
from einops import rearrange

from .layout_error import CheckpointLayoutError


def rename_keys(state: dict, rules: list[tuple[str, str]]) -> dict:
    """Every key rewritten by each ``(pattern, replacement)`` rule in turn (``re.sub``, first match only)."""
    compiled = [(re.compile(p), r) for p, r in rules]
    out = {}
    for key, value in state.items():
        for pattern, repl in compiled:
            key = pattern.sub(repl, key, count=1)
        out[key] = value
    return out


def heads_first_table(value: torch.Tensor, key: str) -> torch.Tensor:
    """A relative-position bias table '(dy dx) heads' (timm's and the official Swin/CoAtNet layout, square window:
    2n-1 offsets per side) -> 'heads dy dx' (:class:`zoo.core.RelPosBias`); other ranks are returned as they are (the
    model says whether they fit). A row count that is no square is no such table: an error naming ``key``."""
    if value.ndim != 2:
        return value
    side = math.isqrt(value.shape[0])
    if side * side != value.shape[0]:
        raise CheckpointLayoutError(
            key, f"a relative-position bias table has (2w-1)^2 rows, one per offset in a square window w, got "
                 f"{value.shape[0]} (shape {tuple(value.shape)})",
            "The table is damaged or from another model: use the checkpoint saved with this model's "
            "window (timm's or the official Swin/CoAtNet file)")
    return rearrange(value, '(dy dx) heads -> heads dy dx', dy=side)
