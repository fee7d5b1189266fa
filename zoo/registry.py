"""Named model variants: which class builds them, with what arguments and preprocessing, and the one check of the
options they are built with (:meth:`Variant.option_problems`, also the config check's)."""
from __future__ import annotations

import difflib
import fnmatch
import sys
from dataclasses import dataclass, field

from torch import nn

from .option_types import OptionTypeError, accepted_options, wrong_types

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
HALF_MEAN, HALF_STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
OPENAI_CLIP_MEAN, OPENAI_CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class OptionProblems:
    """What :meth:`Variant.option_problems` found in the options given to a variant's class."""
    owner: str  #: the variant and its class as messages name them: 'vit_tiny_patch16_224 (ViTBackbone)'
    accepted: set[str] | None  #: the options the class takes; None when it hands ``**kwargs`` on elsewhere
    unknown: list[str]  #: options the class does not take, sorted
    wrong: list[tuple[str, str]]  #: (option, 'expects X, got V (type)') for values their annotation rules out

    def raise_first(self) -> None:
        """TypeError for options the class does not take (listing those it does), else :class:`OptionTypeError`
        for values of the wrong type; nothing when there are neither."""
        if self.unknown:
            raise TypeError(f"{self.owner} does not accept {self.unknown}; accepted options: {sorted(self.accepted)}")
        if self.wrong:
            reasons = '; '.join(f"option {k} {why}" for k, why in self.wrong)
            raise OptionTypeError(f"{self.owner}: {reasons}")


@dataclass(frozen=True)
class Variant:
    """A registered model name: its classes ('backbone', 'classifier'), default arguments and input cfg."""
    name: str
    classes: dict[str, type[nn.Module]]
    kwargs: dict = field(default_factory=dict)
    head_kwargs: dict = field(default_factory=dict)
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    input_size: tuple[int, int] = (224, 224)
    num_classes: int = 1000
    family: str = ''  #: the module that registered the name, e.g. 'zoo.backbones.clip' (its family file)

    def arguments(self, kind: str, overrides: dict) -> dict:
        """What ``kind``'s class is called with: the registered arguments, updated by ``overrides``."""
        head = {**self.head_kwargs, 'num_classes': self.num_classes} if kind == 'classifier' else {}
        return {**self.kwargs, **head, **overrides}

    def option_problems(self, kind: str, overrides: dict) -> OptionProblems:
        """What is wrong with ``overrides`` for ``kind``'s class: the options it does not take, and the values its
        annotations rule out. The one check of a variant's options: :meth:`build` raises on it, and the config
        check (:mod:`heads.engine.config.check`) reports the wrong types by config key before anything is built."""
        cls = self.classes[kind]
        accepted = accepted_options(cls)
        unknown = sorted(set(self.arguments(kind, overrides)) - accepted) if accepted is not None else []
        return OptionProblems(f"{self.name} ({cls.__name__})", accepted, unknown, wrong_types(cls, overrides))

    def build(self, kind: str, **overrides) -> nn.Module:
        cls = self.classes[kind]
        kwargs = self.arguments(kind, overrides)
        self.option_problems(kind, overrides).raise_first()
        model = cls(**kwargs)
        model.pretrained_cfg = {'name': self.name, 'mean': self.mean, 'std': self.std, 'input_size': self.input_size,
                                **({'num_classes': kwargs['num_classes']} if kind == 'classifier' else {})}
        return model


_VARIANTS: dict[str, Variant] = {}


def register_variant(name: str, classes: dict[str, type[nn.Module]], *, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                     input_size: int | tuple[int, int] = 224, num_classes: int = 1000, head: dict | None = None,
                     family: str | None = None, **kwargs) -> None:
    """Register ``name``: ``kwargs`` go to every class, ``head`` only to the classifier. ``mean``, ``std``,
    ``input_size`` and ``num_classes`` (0: no head) are the defaults of timm's ``pretrained_cfg`` of the same name
    (its default weights), so that timm's own file of that name loads into ``create_classifier(name)``.
    ``family`` defaults to the module that calls this (each family file registers its own names), which
    ``tools/list_models.py --overview`` groups by."""
    if name in _VARIANTS:
        raise ValueError(f"model name {name!r} is registered twice")
    size = (input_size, input_size) if isinstance(input_size, int) else tuple(input_size)
    family = family or sys._getframe(1).f_globals.get('__name__', '')
    _VARIANTS[name] = Variant(name, classes, {'img_size': size, **kwargs}, dict(head or {}), tuple(mean), tuple(std),
                              size, num_classes, family)


class UnknownModelError(KeyError):
    """A model name that is not registered; the message lists close matches and the known names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


def get_variant(name: str) -> Variant:
    if name in _VARIANTS:
        return _VARIANTS[name]
    close = difflib.get_close_matches(name, list(_VARIANTS), n=5, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise UnknownModelError(f"unknown backbone {name!r}. {hint}Known backbones "
                            f"(zoo.list_backbones()): {', '.join(sorted(_VARIANTS))}")


def list_backbones(pattern: str | None = None) -> list[str]:
    """Registered names, sorted, optionally filtered by a shell-style ``pattern`` (e.g. 'deit_*')."""
    names = sorted(_VARIANTS)
    return [n for n in names if fnmatch.fnmatch(n, pattern)] if pattern else names
