"""Checkpoints that ``torch.load(weights_only=True)`` reads: resume on torch >= 2.6 without unsafe loading.

mmengine 0.10.7 stores its MessageHub's ``HistoryBuffer`` objects and numpy values in every checkpoint, which
the weights-only unpickler rejects. The hook rewrites them as tensors and plain Python values before the
checkpoint is written, and rebuilds the buffers right after it is read (before mmengine restores the
MessageHub), so neither side needs an allow-list.
"""
from __future__ import annotations

import numpy as np
import torch
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer

from ...registry import HOOKS

_BUFFER = '__history_buffer__'


def to_plain(value):
    """Recursively: HistoryBuffer -> tagged dict of tensors; numpy arrays -> tensors; numpy scalars -> Python."""
    if isinstance(value, HistoryBuffer):
        logs, counts = value.data
        return {_BUFFER: True, 'log_history': torch.from_numpy(np.asarray(logs, dtype=np.float64)),
                'count_history': torch.from_numpy(np.asarray(counts, dtype=np.float64)),
                'max_length': int(value.max_length)}
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy()) if value.dtype != object else [to_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return type(value)((k, to_plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(to_plain(v) for v in value)
    return value


def from_plain(value):
    """Inverse of :func:`to_plain` for the HistoryBuffers (other values stay as tensors/Python values)."""
    if isinstance(value, dict) and value.get(_BUFFER):
        return HistoryBuffer(value['log_history'].tolist(), value['count_history'].tolist(), value['max_length'])
    if isinstance(value, dict):
        return type(value)((k, from_plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(from_plain(v) for v in value)
    return value


@HOOKS.register_module()
class SafeCheckpointHook(Hook):
    """Keeps mmengine checkpoints loadable with ``weights_only=True`` (see the module docstring)."""

    priority = 'VERY_LOW'  # after every hook that adds to the checkpoint

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        for key in list(checkpoint):
            if key != 'state_dict':
                checkpoint[key] = to_plain(checkpoint[key])

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if 'message_hub' in checkpoint:
            checkpoint['message_hub'] = from_plain(checkpoint['message_hub'])
