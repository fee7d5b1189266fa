"""Backbone checkpoint layouts this project reads (one module per source: :mod:`.timm`, :mod:`.hf`, :mod:`.official`,
:mod:`.mmseg`), and picking the one a state dict is in. Whole task models' layouts are :mod:`heads.layouts`'."""
from __future__ import annotations

from torch import nn

from .hf import FROM_HF
from .io import CheckpointError
from .layout_error import CheckpointLayoutError
from .mmseg import swin_from_mmseg, vit_from_mmseg
from .official import FROM_OFFICIAL
from .timm import FROM_TIMM


def _from_zoo(state: dict, family: str) -> dict:
    return state


def _by_family(layout: str, table: dict):
    def convert(state: dict, family: str) -> dict:
        if family not in table:
            raise CheckpointError(f"no {layout} layout converter for the {family!r} family; load with "
                                  f"format='auto' (the layout is told from the keys) or the layout the file is in")
        return table[family](state)
    return convert


def _from_task_model(state: dict, family: str) -> dict:
    """The backbone of a task model trained here (a DPT model, an MAE pre-training run): its 'backbone.*' keys."""
    inner = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    if not inner:
        raise CheckpointError("no 'backbone.' keys: not a task-model checkpoint")
    return inner


CONVERTERS = {'zoo': _from_zoo, 'timm': _by_family('timm', FROM_TIMM), 'hf': _by_family('hf', FROM_HF),
              'official': _by_family('official', FROM_OFFICIAL), 'task': _from_task_model,
              'mmseg': _by_family('mmseg', {'vit': vit_from_mmseg, 'swin': swin_from_mmseg})}


def to_zoo_layout(state: dict, model: nn.Module, format: str = 'auto') -> tuple[dict, str]:
    """``state`` converted to ``model``'s keys; 'auto' picks the layout whose keys overlap the model's most. A layout
    whose converter finds its keys damaged (:class:`CheckpointLayoutError`) is that error, unless another layout gives
    every key the model has."""
    family = getattr(model, 'family', None)
    if format != 'auto':
        if format not in CONVERTERS:
            raise ValueError(f"unknown checkpoint format {format!r}; known: auto, {', '.join(CONVERTERS)}")
        return CONVERTERS[format](state, family), format
    target = set(model.state_dict())
    best, damaged = None, []
    for name, convert in CONVERTERS.items():
        try:
            converted = convert(state, family)
        except CheckpointLayoutError as err:
            damaged.append(err)
            continue
        except CheckpointError:
            continue
        score = len(target & set(converted))
        if best is None or score > best[0]:
            best = (score, converted, name)
    if damaged and (best is None or best[0] < len(target)):
        raise damaged[0]
    return best[1], best[2]
