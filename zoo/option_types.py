"""Checking option values against the type annotations of the ``__init__`` that takes them.

Used where options arrive untyped (configs, ``create_backbone(name, **overrides)``), so that ``depth='two'`` is
refused naming the option and the expected type, instead of failing deep inside the model. Only what the
annotation says for sure is checked: builtin scalars (int accepts bool and integral floats, float accepts int, str
accepts paths), ``X | None``, ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``, sequences, mappings and ``Literal``;
anything else (modules, callables, classes, strings that do not resolve) is accepted as unknown.
"""
from __future__ import annotations

import collections.abc
import inspect
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

from torch import nn


class OptionTypeError(TypeError):
    """An option whose value does not have the type its parameter is annotated with."""


_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _all(results) -> bool | None:
    results = list(results)
    return False if False in results else (None if None in results else True)


def _any(results) -> bool | None:
    results = list(results)
    return True if True in results else (None if None in results else False)


def matches(value, hint) -> bool | None:
    """True/False when ``hint`` decides whether ``value`` fits; None when it cannot tell."""
    if hint is Any or isinstance(hint, (str, typing.TypeVar, typing.ForwardRef)):
        return None
    if hint is None or hint is type(None):
        return value is None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return _any(matches(value, arg) for arg in args)
    if origin is Literal:
        return value in args
    if origin in _SEQUENCES or hint in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and _all(matches(v, a) for v, a in zip(value, args))
        return _all(matches(v, args[0]) for v in value) if args else True
    if origin in _MAPPINGS or hint in _MAPPINGS:
        return isinstance(value, collections.abc.Mapping)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:  # an integral float too: mmengine and most APIs take 1e4 for 10000
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if hint is float:
        return isinstance(value, (int, float))
    if hint is str:
        return isinstance(value, (str, os.PathLike))
    if inspect.isclass(hint) and isinstance(value, hint):
        return True
    return None  # a class the value may be built into (a config dict, a module): not ours to judge


def describe(hint) -> str:
    """The annotation as people write it: 'int', 'int | None', 'tuple[int, int]'."""
    if hint is type(None):
        return 'None'
    if get_origin(hint) in (Union, types.UnionType):
        return ' | '.join(describe(a) for a in get_args(hint))
    if inspect.isclass(hint) and not get_args(hint):
        return hint.__name__
    return str(hint).replace('typing.', '')


def parameter_hints(cls) -> dict[str, Any]:
    """Annotations of the keyword parameters ``cls(...)`` takes, following ``**kwargs`` up its bases (the first
    class to name a parameter wins); unresolvable annotations are left out."""
    hints: dict[str, Any] = {}
    for klass in getattr(cls, '__mro__', (cls,)):
        init = vars(klass).get('__init__') if inspect.isclass(klass) else klass
        if init is None or klass is object:
            continue
        try:
            resolved = typing.get_type_hints(init)
        except Exception:  # an annotation naming something not importable here
            resolved = {}
        parameters = inspect.signature(init).parameters.values()
        for p in parameters:
            if p.name in resolved and p.name not in hints and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                hints[p.name] = resolved[p.name]
        for name, hint in vars(klass).get('options_accepted', {}).items():  # what its ``**kwargs`` take
            hints.setdefault(name, hint)
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return hints


def wrong_types(cls, options: dict) -> list[tuple[str, str]]:
    """(option, 'expects X, got V (type)') for every option whose value its annotation rules out."""
    hints = parameter_hints(cls)
    found = []
    for key, value in options.items():
        if key in hints and matches(value, hints[key]) is False:
            found.append((key, f"expects {describe(hints[key])}, got {value!r} ({type(value).__name__})"))
    return found


def accepted_options(cls: type, kwargs_accepted: Mapping[type, frozenset] | None = None) -> set[str] | None:
    """The keyword arguments ``cls(...)`` accepts, following ``**kwargs`` handed on to ``super().__init__`` up its
    bases (``nn.Module`` and ``object`` take none); None when a class takes ``**kwargs`` that go elsewhere (they are
    checked where they go), as its source shows, unless the class lists the names its ``**kwargs`` take in a mapping
    ``options_accepted`` (name -> type; :func:`parameter_hints` reads their types). ``kwargs_accepted``: for classes
    whose ``**kwargs`` go somewhere known, the keys taken there."""
    keys: set[str] = set()
    for klass in cls.__mro__:
        if klass in (object, nn.Module):
            return keys
        init = vars(klass).get('__init__')
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        keys |= {p.name for p in params if p.name != 'self' and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            return keys
        if 'options_accepted' in vars(klass):  # the class lists what its own ``**kwargs`` take
            return keys | set(vars(klass)['options_accepted'])
        if kwargs_accepted and klass in kwargs_accepted:
            return keys | set(kwargs_accepted[klass])
        try:
            source = inspect.getsource(init)
        except (OSError, TypeError):  # no source (defined in a REPL or exec): assume they go on to the base
            continue
        if 'super().__init__(' not in source or '**kwargs' not in source.split('super().__init__(', 1)[1]:
            return None
    return keys
