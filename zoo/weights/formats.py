"""Checkpoint layouts this project reads, and picking the one a state dict is in."""
from __future__ import annotations

from torch import nn

from .io import CheckpointError
from .timm import FROM_TIMM


def _from_zoo(state: dict, family: str) -> dict:
    return state


def _from_timm(state: dict, family: str) -> dict:
    if family not in FROM_TIMM:
        raise CheckpointError(f"no timm layout converter for the {family!r} family")
    return FROM_TIMM[family](state)


CONVERTERS = {'zoo': _from_zoo, 'timm': _from_timm}


def to_zoo_layout(state: dict, model: nn.Module, format: str = 'auto') -> tuple[dict, str]:
    """``state`` converted to ``model``'s keys; 'auto' picks the layout whose keys overlap the model's most."""
    family = getattr(model, 'family', None)
    if format != 'auto':
        if format not in CONVERTERS:
            raise ValueError(f"unknown checkpoint format {format!r}; known: auto, {', '.join(CONVERTERS)}")
        return CONVERTERS[format](state, family), format
    target = set(model.state_dict())
    best = None
    for name, convert in CONVERTERS.items():
        try:
            converted = convert(state, family)
        except CheckpointError:
            continue
        score = len(target & set(converted))
        if best is None or score > best[0]:
            best = (score, converted, name)
    return best[1], best[2]
