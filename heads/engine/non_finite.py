"""Stop training at the first non-finite loss, before a checkpoint of diverged weights can be written."""
from __future__ import annotations

import math

import torch
from mmengine.hooks import Hook

from ..registry import HOOKS


class DivergedError(FloatingPointError):
    """Training produced a NaN/inf loss or weights; the message says when and which checkpoint is intact."""


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Raises :class:`DivergedError` when an iteration's loss is NaN or infinite, and refuses to write a checkpoint
    of non-finite weights. Runs before the checkpoint hook, so the last checkpoint on disk stays the last good one.
    """

    priority = 'VERY_HIGH'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        losses = {k: v.detach().item() if torch.is_tensor(v) else float(v)
                  for k, v in (outputs or {}).items() if 'loss' in k}
        bad = {k: v for k, v in losses.items() if not math.isfinite(v)}
        if bad:
            self._stop(runner, f"loss {bad} at iteration {runner.iter + 1}")

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        bad = [k for k, v in checkpoint['state_dict'].items() if v.is_floating_point() and not torch.isfinite(v).all()]
        if bad:
            self._stop(runner, f"non-finite weights {bad[:5]} at iteration {runner.iter + 1}")

    @staticmethod
    def _stop(runner, what: str) -> None:
        last = runner.message_hub.get_info('last_ckpt')
        kept = (f"the last good checkpoint is {last} (resume with --resume)" if last
                else "no checkpoint had been written yet")
        raise DivergedError(f"training diverged: {what}; stopped without saving, {kept}. Lower the learning rate, "
                            f"add warm-up or gradient clipping (optim_wrapper.clip_grad), or train in fp32")
