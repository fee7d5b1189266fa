"""Random-number state in checkpoints, so that a resumed run draws the same dropout / DropPath masks.

mmengine resumes the data side by replaying the sampler and pipeline up to the checkpoint's iteration (the
pipeline's numpy draws repeat with it), but the torch generator that the model draws from starts afresh. The
hook stores the torch (CPU and CUDA) generator states with each checkpoint and puts them back right before
the first iteration after a resume, after mmengine's replay of the data. With them it stores the process's
timed kernel choice (:func:`zoo.core.conv_grad.choice`), which the resumed process then takes instead of timing
again: a timing near its margin could choose the other kernel, whose sums round differently.
"""
from __future__ import annotations

import torch
from mmengine.hooks import Hook

from zoo.core import conv_grad

from ..registry import HOOKS

KEY = 'torch_rng_state'


@HOOKS.register_module()
class RngStateHook(Hook):
    """Saves the torch generator states (and the convolution kernel choice) in checkpoints and restores them when
    training resumes."""

    priority = 'VERY_LOW'

    def __init__(self):
        self._pending: tuple[int, dict] | None = None
        self._pinned = False

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[KEY] = {'cpu': torch.get_rng_state(),
                           'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
                           'conv_weight_grad': conv_grad.decided()}

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if KEY in checkpoint:
            self._pending = (checkpoint.get('meta', {}).get('iter'), checkpoint[KEY])

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if self._pending is None:
            return
        iteration, state = self._pending
        self._pending = None
        if iteration != runner.iter:  # weights loaded to start a new run (load_from), not a resume
            return
        torch.set_rng_state(state['cpu'])
        if state.get('conv_weight_grad'):
            conv_grad.pin(state['conv_weight_grad'])
            self._pinned = True
        if state['cuda'] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state['cuda'])

    def after_run(self, runner) -> None:
        if self._pinned:  # the choice belongs to the resumed run, not to later runs of this process
            conv_grad.pin(None)
            self._pinned = False
