"""Which parameters take no weight decay, declared by the modules that own them (as timm's ``no_weight_decay``):
position tables, prefix tokens, relative-position tables and the MLPs that compute them."""
from __future__ import annotations

from torch import nn


class NoWeightDecay:
    """Mixin of a module whose parameters named in ``no_weight_decay_names`` (relative to the module, dotted for
    sub-modules; ``'*'`` for all of them) take no weight decay."""
    no_weight_decay_names: tuple[str, ...] = ()


def no_weight_decay_of(module: nn.Module) -> set[str]:
    """The names (as ``module.named_parameters()`` gives them) of the parameters that the :class:`NoWeightDecay`
    modules inside ``module`` (itself included) declare."""
    names = set()
    for prefix, child in module.named_modules():
        if isinstance(child, NoWeightDecay):
            for local, _ in child.named_parameters():
                if local in child.no_weight_decay_names or '*' in child.no_weight_decay_names:
                    names.add(f'{prefix}.{local}' if prefix else local)
    return names
