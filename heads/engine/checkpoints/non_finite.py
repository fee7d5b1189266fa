"""Stop training at the first non-finite loss, and name a checkpoint that was good, saying how it was chosen.

A diverging run rarely goes from a steady loss straight to NaN: the loss first spikes and climbs for a while,
and checkpoints saved then hold finite but already ruined weights (resuming them at a sane learning rate
diverges again). So the hook watches the total loss for spikes as well as for NaN/inf: an iteration whose loss
exceeds ``spike_factor`` times the median of the (up to ``window``) steady iterations before it starts an
unstable stretch, which ends once the loss has stayed under that level for ``window`` iterations.

A checkpoint saved after iteration c holds the weights whose loss iteration c + 1 measures, so it is judged by
that loss: it is good when that loss is finite and the run is not in an unstable stretch. :class:`DivergedError`
names the newest good checkpoint, and the later ones with the reason they are not.
"""
from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import torch
from mmengine.hooks import Hook

from ...registry import HOOKS


class DivergedError(FloatingPointError):
    """Training produced a NaN/inf loss or weights; the message says when and which checkpoint is intact."""


@dataclass
class Spike:
    iteration: int
    loss: float
    median: float


@dataclass
class Saved:
    iteration: int
    path: str
    judged: bool = False
    spoiled_by: str = ''  # why it is not good ('' = good, once judged)


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Raises :class:`DivergedError` when an iteration's loss is NaN or infinite, and refuses to write a checkpoint
    of non-finite weights. Runs before the checkpoint hook, so no checkpoint of a NaN iteration is written.
    ``spike_factor``, ``window``, ``min_history`` (steady iterations before spikes are looked for): see the module
    docstring; ``spike_factor=None`` turns spike watching off.
    """

    priority = 'VERY_HIGH'

    def __init__(self, spike_factor: float | None = 5.0, window: int = 20, min_history: int = 3):
        if spike_factor is not None and spike_factor <= 1:
            raise ValueError(f"spike_factor must be above 1 (a multiple of the recent median loss), got {spike_factor}")
        self.spike_factor, self.window, self.min_history = spike_factor, window, min_history
        self._recent: deque[float] = deque(maxlen=window)
        self._spike: Spike | None = None
        self._calm = 0
        self._saved: list[Saved] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        iteration = runner.iter + 1
        losses = {k: v.detach().item() if torch.is_tensor(v) else float(v)
                  for k, v in (outputs or {}).items() if 'loss' in k}
        bad = {k: v for k, v in losses.items() if not math.isfinite(v)}
        if bad:
            self._judge(f"the loss of the iteration after it was {bad}")
            self._stop(runner, f"loss {bad} at iteration {iteration}")
        if losses:
            self._watch(runner, losses.get('loss', sum(losses.values())), iteration)
        spike = self._spike
        self._judge(f"the loss after it was spiking: from iteration {spike.iteration} on ({spike.loss:.4g} there, "
                    f"{spike.loss / spike.median:.1f}x the median {spike.median:.4g} before)" if spike else '')

    def _judge(self, spoiled_by: str) -> None:
        """The verdict on checkpoints saved since the last iteration, from this iteration's loss."""
        for saved in self._saved:
            if not saved.judged:
                saved.judged, saved.spoiled_by = True, spoiled_by

    def _watch(self, runner, loss: float, iteration: int) -> None:
        if self.spike_factor is None:
            return
        if len(self._recent) >= self.min_history or self._spike is not None:
            median = self._spike.median if self._spike else statistics.median(self._recent)
            if median > 0 and loss > self.spike_factor * median:
                if self._spike is None:
                    self._spike = Spike(iteration, loss, median)
                    runner.logger.warning(
                        f"loss spike at iteration {iteration}: {loss:.4g} is {loss / median:.1f}x the median "
                        f"{median:.4g} of the {len(self._recent)} iterations before; checkpoints are not counted as "
                        f"good until the loss stays under {self.spike_factor * median:.4g} for {self.window} "
                        f"iterations")
                self._calm = 0
                return
            if self._spike is not None:  # under the level again: steady once it stays there
                self._calm += 1
                if self._calm < self.window:
                    return
                self._spike = None
        self._recent.append(loss)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        bad = [k for k, v in checkpoint['state_dict'].items() if v.is_floating_point() and not torch.isfinite(v).all()]
        if bad:
            self._stop(runner, f"non-finite weights {bad[:5]} at iteration {runner.iter + 1}")
        path = runner.message_hub.get_info('last_ckpt')
        if path:
            self._saved = [s for s in self._saved if s.path != path] + [Saved(runner.iter + 1, path)]

    def _stop(self, runner, what: str) -> None:
        raise DivergedError(f"training diverged: {what}; stopped without saving. {self._last_good(runner)}. Lower "
                            f"the learning rate, add warm-up or gradient clipping (optim_wrapper.clip_grad), or "
                            f"train in fp32")

    def _last_good(self, runner) -> str:
        existing = [s for s in self._saved if '://' in s.path or Path(s.path).is_file()]
        good = [s for s in existing if s.judged and not s.spoiled_by]
        later = [s for s in existing if s.spoiled_by and (not good or s.iteration > good[-1].iteration)]
        why_not = ('; not ' + '; '.join(f"{Path(s.path).name} ({s.spoiled_by})" for s in later)) if later else ''
        if good:
            return (f"The last good checkpoint is {good[-1].path}: the newest one whose weights gave a steady, finite "
                    f"loss in the iteration after it was saved{why_not}. Resume from it explicitly: --resume "
                    f"{good[-1].path}")
        if later:
            return f"No good checkpoint is left on disk{why_not}"
        earlier = runner.message_hub.get_info('last_ckpt')
        if earlier:  # written before this session (resumed): its loss was not watched here
            return f"The last checkpoint is {earlier}, written before this session (resume with --resume {earlier})"
        return "No checkpoint had been written yet"
