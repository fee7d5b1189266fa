"""Config keys that no component accepts, found before anything is built, named by their dotted path."""
from __future__ import annotations

import inspect

import mmengine.registry as mmengine_registries
from mmengine.registry import Registry

from .. import registry as our_registries

#: Keys that mmengine's builders take out of a component's dict before calling the class.
CONSUMED_BY_BUILDERS = frozenset({'type', '_scope_', 'priority', 'constructor', 'paramwise_cfg'})


class ConfigKeyError(TypeError):
    """A config key that the component it configures does not accept."""


def _registries() -> list[Registry]:
    found = [*vars(our_registries).values(), *vars(mmengine_registries).values()]
    return [r for r in found if isinstance(r, Registry)]


def _component(type_) -> type | None:
    if inspect.isclass(type_):
        return type_
    for registry in _registries():
        try:
            found = registry.get(type_)
        except Exception:  # a registry whose lazy imports fail for this name: not ours to judge
            continue
        if inspect.isclass(found):
            return found
    return None


def accepted_keys(cls: type) -> set[str] | None:
    """The keyword arguments ``cls(...)`` accepts, following ``**kwargs`` handed to ``super().__init__``;
    None when it takes arbitrary keywords (they go elsewhere, and are checked there)."""
    keys: set[str] = set()
    for klass in cls.__mro__:
        if '__init__' not in vars(klass):
            continue
        init = vars(klass)['__init__']
        if klass is object:
            return keys
        params = inspect.signature(init).parameters.values()
        keys |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            return keys
        try:
            source = inspect.getsource(init)
        except (OSError, TypeError):
            return None
        if 'super().__init__(' not in source or '**kwargs' not in source.split('super().__init__(', 1)[1]:
            return None
    return keys


def check_config_keys(tree, path: str = '') -> None:
    """Raise :class:`ConfigKeyError` for the first component dict (one with a 'type') holding a key its class
    does not accept; the message gives the key's dotted path and the accepted keys."""
    if isinstance(tree, dict):
        cls = _component(tree['type']) if 'type' in tree else None
        accepted = accepted_keys(cls) if cls is not None else None
        if accepted is not None:
            unknown = sorted(k for k in tree if k not in accepted | CONSUMED_BY_BUILDERS)
            if unknown:
                where = ', '.join(f'{path}.{k}' if path else k for k in unknown)
                raise ConfigKeyError(
                    f"config key {where} is not accepted by {cls.__name__} ({inspect.getmodule(cls).__name__}); "
                    f"it accepts: {', '.join(sorted(accepted - {'self'}))}. Remove it or fix its spelling")
        for key, value in tree.items():
            check_config_keys(value, f'{path}.{key}' if path else str(key))
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            check_config_keys(value, f'{path}.{index}')
