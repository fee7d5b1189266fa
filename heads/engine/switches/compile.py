"""``torch.compile`` of a task model's backbone and neck (``--compile`` in tools/train.py and tools/test.py).

The config key ``compile_parts = dict(parts=('backbone', 'neck'), dynamic=None, mode=None)`` (what ``--compile``
sets) compiles those parts in place when the runner builds the model: the backbone's ``forward_taps`` (the call
the task models make) and the neck's forward. Parameter names, the state dict and the checkpoints stay exactly as
without compiling, so checkpoints move freely between compiled and eager runs. ``dynamic=None`` lets torch mark
the sizes that change (validation images of varying size, multi-scale training) as dynamic after their first
recompilation; True compiles for dynamic sizes from the start, False specialises on every size. The decode
head (a few convolutions and a resize) is left eager. mmengine's own ``compile`` key (the whole ``train_step``)
is a different switch and is not used here.
"""
from __future__ import annotations

import torch

from zoo.contract import Backbone

DEFAULT_PARTS = ('backbone', 'neck')


def compile_parts(model: torch.nn.Module, parts=DEFAULT_PARTS, dynamic: bool | None = None,
                  mode: str | None = None) -> list[str]:
    """Compile ``model``'s named ``parts`` in place; returns their names. A part the model lacks is an error."""
    children = dict(model.named_children())
    missing = [p for p in parts if p not in children or children[p] is None]
    if missing:
        raise ValueError(f"compile_parts: {type(model).__name__} has no {', '.join(missing)} to compile; its parts "
                         f"are {', '.join(children)} (set compile_parts.parts to some of them)")
    for name in parts:
        part = children[name]
        if isinstance(part, Backbone):
            part.forward_taps = torch.compile(part.forward_taps, dynamic=dynamic, mode=mode)
        else:
            part.compile(dynamic=dynamic, mode=mode)
    return list(parts)


def compile_from_config(model: torch.nn.Module, options) -> list[str]:
    """:func:`compile_parts` with the config's ``compile_parts`` dict (None or empty: nothing compiled)."""
    if not options:
        return []
    options = dict(options)
    unknown = set(options) - {'parts', 'dynamic', 'mode'}
    if unknown:
        raise ValueError(f"compile_parts has no key {', '.join(sorted(unknown))}; it takes parts, dynamic, mode")
    return compile_parts(model, tuple(options.get('parts', DEFAULT_PARTS)), options.get('dynamic'),
                         options.get('mode'))
