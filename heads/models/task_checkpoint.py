"""Loading a whole task model's checkpoint in any layout of :data:`heads.layouts.table.LAYOUTS` (this project's,
mmseg's DPT or UperNet segmentor, the authors' DPT and Depth Anything V2, ...), told by the table's detect
predicates: one layout detecting, or a refusal naming the known ones before anything is loaded."""
from __future__ import annotations

import copy

import torch
from torch import nn

from zoo.weights import CheckpointError, LoadReport, load_pretrained, read_state_dict

from ..layouts.detect import Checkpoint, convert_checkpoint, detect_layout
from ..layouts.table import LAYOUTS


def task_checkpoint_layout(state, model: nn.Module, name: str = 'state dict') -> str:
    """The name of the layout (a row of :data:`heads.layouts.table.LAYOUTS`) ``state`` is in, to load into
    ``model``: 'zoo' for this project's, 'mmseg' for an mmseg DPT or UperNet (Swin) segmentor, ...; a state in none,
    in several or for another task model is refused (:mod:`heads.layouts.detect`'s errors, naming ``name``), as are
    mmseg DPT names mixed with others (:class:`heads.layouts.mmseg.MixedLayoutError`)."""
    return detect_layout(Checkpoint(state, model, name), LAYOUTS).name


class NonFiniteWeightsError(CheckpointError):
    """A checkpoint to predict with holds NaN or infinite weights (a diverged run): its predictions mean nothing."""


def check_finite(state: dict, name: str) -> None:
    """Raise :class:`NonFiniteWeightsError` naming ``name`` and the first tensor with a NaN or an infinity."""
    for key, value in state.items():
        if (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all()):
            nan, inf = int(torch.isnan(value).sum()), int(torch.isinf(value).sum())
            raise NonFiniteWeightsError(
                f"{name}: tensor {key} {tuple(value.shape)} is not finite ({nan} NaN, {inf} infinite of "
                f"{value.numel()} values); a model with it predicts nothing meaningful (e.g. class 0 everywhere). "
                f"The run that wrote it diverged: evaluate an earlier checkpoint of it, or retrain (a lower "
                f"learning rate, optim_wrapper.clip_grad)")


def load_task_checkpoint(model: nn.Module, source, *, strict: bool = True, name: str | None = None,
                         finite: bool = False, layouts=LAYOUTS) -> LoadReport:
    """``source`` (a path or a state dict, training containers such as mmengine's ``{'meta', 'state_dict'}``
    unwrapped) into ``model``, converted from the layout of ``layouts`` it is in
    (:func:`heads.layouts.detect.convert_checkpoint`); see
    :func:`zoo.weights.load_pretrained` for ``strict`` and the errors. ``finite``: refuse NaN or infinite weights
    (:class:`NonFiniteWeightsError`) before anything is loaded, as evaluation and prediction do."""
    if name is None and not isinstance(source, dict):
        name = str(source)
    state = read_state_dict(source)
    if finite:
        check_finite(state, name or 'state dict')
    state, layout = convert_checkpoint(Checkpoint(state, model, name or 'state dict'), layouts)
    return load_pretrained(model, state, format='zoo', strict=strict, name=name, layout=layout.name)


def without_backbone_weights(model_cfg: dict) -> dict:
    """``model_cfg`` (a copy when it changes) without its backbone's weights file (``backbone.pretrained``, or a
    detector's ``pretrained`` beside a backbone given by name): a whole task checkpoint loaded after the build holds
    the backbone too, so that file is neither needed nor read (as mmseg's test)."""
    backbone = model_cfg.get('backbone')
    if isinstance(backbone, dict) and backbone.get('pretrained'):
        model_cfg = copy.deepcopy(model_cfg)
        model_cfg['backbone']['pretrained'] = None
    elif isinstance(backbone, str) and model_cfg.get('pretrained'):
        model_cfg = copy.deepcopy(model_cfg)
        model_cfg['pretrained'] = None
    return model_cfg
