"""Loading a whole task model's checkpoint: this project's layout, or mmseg's DPT segmentor
(:mod:`zoo.weights.mmseg`), told apart by its keys."""
from __future__ import annotations

import copy

from torch import nn

from zoo.weights import LoadReport, load_pretrained, read_state_dict
from zoo.weights.mmseg import check_patch_bias, dpt_from_mmseg, is_mmseg_dpt


def task_checkpoint_layout(state, name: str = 'state dict') -> str:
    """'mmseg' for an mmseg DPT checkpoint, else 'zoo'; mmseg names mixed with others raise
    :class:`zoo.weights.mmseg.MixedLayoutError` naming ``name``."""
    return 'mmseg' if is_mmseg_dpt(state, name) else 'zoo'


def load_task_checkpoint(model: nn.Module, source, *, strict: bool = True, name: str | None = None) -> LoadReport:
    """``source`` (a path or a state dict, training containers such as mmengine's ``{'meta', 'state_dict'}``
    unwrapped) into ``model``, converted from mmseg's layout when it is in it; see
    :func:`zoo.weights.load_pretrained` for ``strict`` and the errors."""
    if name is None and not isinstance(source, dict):
        name = str(source)
    state = read_state_dict(source)
    layout = task_checkpoint_layout(state, name or 'state dict')
    if layout == 'mmseg':
        check_patch_bias(dpt_from_mmseg(state), model)
    return load_pretrained(model, state, format=layout, strict=strict, name=name)


def without_backbone_weights(model_cfg: dict) -> dict:
    """``model_cfg`` (a copy when it changes) without ``backbone.pretrained``: a whole task checkpoint loaded after
    the build holds the backbone too, so its separate weights file is neither needed nor read (as mmseg's test)."""
    if not model_cfg.get('backbone', {}).get('pretrained'):
        return model_cfg
    model_cfg = copy.deepcopy(model_cfg)
    model_cfg['backbone']['pretrained'] = None
    return model_cfg
