"""Key renaming by ordered regular-expression rules, and the offset-table layout change, shared by the layout
converters.

A converter writes its renaming as a table, one rule per line, ``PATTERN -> REPLACEMENT`` (:func:`rules`): a regular
expression and its ``re.sub`` replacement, neither holding a space; an empty replacement deletes the match, and a
``#`` starts a comment. A rule whose pattern or replacement is computed (e.g. a function of the match) stays a pair
beside the table's rules."""
from __future__ import annotations

import math
import re

import torch
from einops import rearrange

from .layout_error import CheckpointLayoutError


def rules(table: str) -> list[tuple[str, str]]:
    """The ``(pattern, replacement)`` rules of a table of ``PATTERN -> REPLACEMENT`` lines (see the module doc)."""
    out = []
    for line in table.splitlines():
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        pattern, arrow, replacement = (part.strip() for part in line.partition('->'))
        if not arrow or not pattern or ' ' in pattern or ' ' in replacement:
            raise ValueError(f"a rename rule is one line 'PATTERN -> REPLACEMENT' (no spaces in either), got {line!r}")
        out.append((pattern, replacement))
    return out


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
