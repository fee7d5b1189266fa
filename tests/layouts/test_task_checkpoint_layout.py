"""A task model's checkpoint in mmseg's layout, converted in :mod:`heads.layouts.mmseg` before zoo loads it, is still
reported and named as mmseg's: the load report's format and a misfit's message say 'mmseg layout'."""
import pytest

import heads
from heads.models.task_checkpoint import load_task_checkpoint
from zoo.weights import CheckpointMismatchError

from .test_mmseg_recipe import mmseg_state, tiny_cfg


def test_an_mmseg_checkpoint_is_reported_and_refused_as_mmsegs_layout():
    model = heads.MODELS.build(tiny_cfg([('backbone.patch_bias', True)]).model)
    state = mmseg_state(patch_bias=True)
    assert load_task_checkpoint(model, state).format == 'mmseg'
    del state['decode_head.conv_seg.bias']
    misfit = r"checkpoint dpt\.pth \(mmseg layout\) does not fit Segmentor(.|\n)*missing in checkpoint \(1\): "
    with pytest.raises(CheckpointMismatchError, match=misfit + r"decode_head\.head\.4\.bias"):
        load_task_checkpoint(model, state, name='dpt.pth')
