"""Config mistakes found before anything is built, each named by its dotted key: a key no component accepts
(hooks included), a value of the wrong type (checked against the component's ``__init__`` annotations; backbone
options by the zoo registry's check of the variant, the one its build runs), a ``type`` no registry knows, and
mmengine's 'Pretrained' initialisation (it would read a checkpoint past zoo.weights.io's safe reader)."""
from __future__ import annotations

import difflib
import inspect

import mmengine.registry as mmengine_registries
from mmengine.hooks import CheckpointHook
from mmengine.registry import Registry

from zoo.factory import create_backbone
from zoo.option_types import accepted_options, wrong_types
from zoo.registry import UnknownModelError, get_variant

from ... import registry as our_registries

#: Keys that mmengine's builders take out of a component's dict before calling the class.
CONSUMED_BY_BUILDERS = frozenset({'type', '_scope_', 'priority', 'constructor', 'paramwise_cfg'})
#: Classes whose ``**kwargs`` go somewhere known rather than to their base, with the keys accepted there.
#: CheckpointHook hands them to ``Runner.save_checkpoint``, whose every argument it already passes itself.
KWARGS_ACCEPTED = {CheckpointHook: frozenset()}
#: How configs name a zoo backbone, and the keys ``zoo.create_backbone`` itself takes (its named parameters, read
#: from its signature; the rest, its ``**overrides``, go to the backbone class).
BACKBONE_TYPES = ('ZooBackbone', 'heads.ZooBackbone')
FACTORY_KEYS = frozenset(p.name for p in inspect.signature(create_backbone).parameters.values()
                         if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))


class ConfigKeyError(TypeError):
    """A config key that the component it configures does not accept."""


class ConfigTypeError(TypeError):
    """A config value of a type its component does not take, or a ``type`` that no registry knows."""


def _registries() -> list[Registry]:
    found = [*vars(our_registries).values(), *vars(mmengine_registries).values()]
    return [r for r in found if isinstance(r, Registry)]


def _lookup(type_) -> tuple[object, list[str]]:
    """What ``type_`` names in any registry (a class or a function; None when no registry has it), and how each
    registry whose lookup raised failed (e.g. the module a dotted type names raises on import)."""
    if not isinstance(type_, str):
        return type_, []
    failures = []
    for registry in _registries():
        try:
            found = registry.get(type_)
        except Exception as err:  # one registry's failure; another may still have the name
            cause = err.__cause__ or err.__context__ or err
            failures.append(f"the {registry.name!r} registry: {type(cause).__name__}: {cause}")
            continue
        if found is not None:
            return found, []
    return None, list(dict.fromkeys(failures))


def _registered(type_):
    """What ``type_`` names in any registry (a class or a function); None when no registry has it."""
    return _lookup(type_)[0]


def _component(type_) -> type | None:
    found = _registered(type_)
    return found if inspect.isclass(found) else None


def _known_names() -> set[str]:
    names: set[str] = set()
    stack = _registries()
    while stack:
        registry = stack.pop()
        names |= set(registry.module_dict)
        stack.extend(registry._children.values())
    return names


def _dotted(path: str, key) -> str:
    return f'{path}.{key}' if path else str(key)


def _check_unknown_type(tree: dict, path: str) -> None:
    type_ = tree['type']
    found, failures = _lookup(type_)
    if not isinstance(type_, str) or found is not None:
        return
    if failures:
        raise ConfigTypeError(f"config key {_dotted(path, 'type')}: looking up {type_!r} failed in "
                              f"{'; '.join(failures[:3])}. Fix that module (or the type's spelling) so that it "
                              f"imports")
    close = difflib.get_close_matches(type_.split('.')[-1], sorted(_known_names()), n=3, cutoff=0.6)
    hint = f"Did you mean {', '.join(close)}? " if close else ""
    raise ConfigTypeError(f"config key {_dotted(path, 'type')}: {type_!r} is not a registered type. {hint}Check its "
                          f"spelling, or import the module that registers it (custom_imports)")


def _raise_wrong_types(wrong: list[tuple[str, str]], path: str, owner: str) -> None:
    if wrong:
        where = '; '.join(f"config key {_dotted(path, k)}: {owner} {why}" for k, why in wrong)
        raise ConfigTypeError(f"{where}. Fix the value (numbers without quotes, sequences in brackets)")


def _check_backbone(tree: dict, path: str) -> None:
    """A zoo backbone's options against its class's annotations, by the registry's own check of a variant's options
    (:meth:`zoo.registry.Variant.option_problems`; its key names are left to the factory, which raises on that
    check when it builds and lists the accepted ones); an unknown name is an error naming the key, with the
    registry's close names."""
    name = tree.get('name')
    if not isinstance(name, str):
        raise ConfigTypeError(f"config key {_dotted(path, 'name')}: a backbone name (a string such as "
                              f"'vit_base_patch16_224', see zoo.list_backbones()), got {name!r}")
    try:
        variant = get_variant(name)
    except UnknownModelError as err:
        raise ConfigKeyError(f"config key {_dotted(path, 'name')}: {err}") from err
    options = {k: v for k, v in tree.items() if k not in FACTORY_KEYS | CONSUMED_BY_BUILDERS}
    problems = variant.option_problems('backbone', options)
    _raise_wrong_types(problems.wrong, path, problems.owner)


def _check_not_pretrained_init(tree: dict, path: str) -> None:
    """mmengine's ``init_cfg=dict(type='Pretrained', checkpoint=...)`` reads with mmengine's own loader (URLs
    downloaded, no weights-only check): refused in favour of the readers that go through zoo.weights.io."""
    from mmengine.model.weight_init import PretrainedInit
    if _registered(tree['type']) is PretrainedInit:
        raise ConfigKeyError(
            f"config key {_dotted(path, 'type')}: 'Pretrained' initialisation reads {tree.get('checkpoint')!r} with "
            f"mmengine's loader, past this project's safe reader (local files, weights-only, checksums); use "
            f"load_from={tree.get('checkpoint')!r} for a whole model, or the backbone's pretrained= option")


def check_config_keys(tree, path: str = '') -> None:
    """Raise :class:`ConfigKeyError` for the first component dict (one with a 'type') holding a key its class
    does not accept, and :class:`ConfigTypeError` for a value its annotation rules out or a 'type' no registry
    has; the message gives the key's dotted path (and the accepted keys, the expected type or close names)."""
    if isinstance(tree, dict):
        if 'type' in tree:
            _check_unknown_type(tree, path)
            _check_not_pretrained_init(tree, path)
        cls = _component(tree['type']) if 'type' in tree else None
        accepted = accepted_options(cls, KWARGS_ACCEPTED) if cls is not None else None
        if accepted is not None:
            unknown = sorted(k for k in tree if k not in accepted | CONSUMED_BY_BUILDERS)
            if unknown:
                where = ', '.join(_dotted(path, k) for k in unknown)
                raise ConfigKeyError(
                    f"config key {where} is not accepted by {cls.__name__} ({inspect.getmodule(cls).__name__}); "
                    f"it accepts: {', '.join(sorted(accepted))}. Remove it or fix its spelling")
        if cls is not None:
            _raise_wrong_types(wrong_types(cls, {k: v for k, v in tree.items() if k not in CONSUMED_BY_BUILDERS}), path,
                               f"{cls.__name__} ({inspect.getmodule(cls).__name__})")
        elif tree.get('type') in BACKBONE_TYPES:
            _check_backbone(tree, path)
        for key, value in tree.items():
            check_config_keys(value, _dotted(path, key))
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            check_config_keys(value, f'{path}.{index}')
