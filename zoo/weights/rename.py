"""Key renaming by ordered regular-expression rules, shared by the layout converters."""
from __future__ import annotations

import re


def rename_keys(state: dict, rules: list[tuple[str, str]]) -> dict:
    """Every key rewritten by each ``(pattern, replacement)`` rule in turn (``re.sub``, first match only)."""
    compiled = [(re.compile(p), r) for p, r in rules]
    out = {}
    for key, value in state.items():
        for pattern, repl in compiled:
            key = pattern.sub(repl, key, count=1)
        out[key] = value
    return out
