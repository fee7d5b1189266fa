"""Which keys of two experiment configs differ (flattened dotted paths, lists indexed)."""
from __future__ import annotations


def flatten(tree, prefix: str = '') -> dict:
    """Nested dicts/lists/tuples as {'a.b.0.c': leaf}."""
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return {prefix: tree}
    out = {}
    for key, value in items:
        out.update(flatten(value, f'{prefix}.{key}' if prefix else str(key)))
    return out


def differing_keys(a, b) -> set[str]:
    """Flattened keys whose values differ between configs (or dicts) ``a`` and ``b``."""
    fa = flatten(a.to_dict() if hasattr(a, 'to_dict') else a)
    fb = flatten(b.to_dict() if hasattr(b, 'to_dict') else b)
    return {k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)}
