"""Progress a user sees from the first iterations, and an ETA that counts what is still to come.

- :class:`ProgressLoggerHook` (mmengine's LoggerHook, which every config's ``default_hooks.logger`` names) logs a
  one-line summary of the run before the first iteration, then iterations 1, 2, 5, 10, 20, 50, ... below the
  configured interval (so a slow CPU run is not silent for minutes), then every ``interval`` as before, and the
  last iteration.
- :class:`EtaTimerHook` (mmengine's IterTimerHook, ``default_hooks.timer``) estimates the remaining time from the
  recent iterations only (the first ones carry start-up costs, and speed changes with the machine's load) and adds
  the validation passes still to come, timed from the last one; time spent validating or saving is not counted
  as training time. :class:`Eta` holds the arithmetic.
"""
from __future__ import annotations

import time
from collections import deque

from mmengine.hooks import IterTimerHook, LoggerHook

from ...registry import HOOKS
from .essentials import run_summary


def early_log_points(interval: int) -> list[int]:
    """Iterations (counted from the run's start) logged before the first regular ``interval``: 1, 2, 5, 10, 20, ..."""
    points, scale = [], 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= interval:
                return points
            points.append(step * scale)
        scale *= 10


class Eta:
    """Remaining seconds of a run: mean of the last ``window`` training iterations times the iterations left, plus
    the validation passes left times the duration of the last one (none counted before the first is timed)."""

    def __init__(self, max_iters: int, val_interval: int | None, val_begin: int = 1, window: int = 20):
        self.max_iters, self.val_interval, self.val_begin = max_iters, val_interval, val_begin
        self.recent: deque[float] = deque(maxlen=window)
        self.val_seconds: float | None = None

    def add_iteration(self, seconds: float) -> None:
        self.recent.append(seconds)

    def add_validation(self, seconds: float) -> None:
        self.val_seconds = seconds

    def validations_after(self, done: int) -> int:
        """Validation passes still to come once ``done`` iterations are finished (mmengine's IterBasedTrainLoop
        validates after iteration i when i >= ``val_begin`` and i is a multiple of ``val_interval`` or the last)."""
        first = max(done + 1, self.val_begin)
        if not self.val_interval or first > self.max_iters:
            return 0
        multiples = self.max_iters // self.val_interval - (first - 1) // self.val_interval
        return multiples + (self.max_iters % self.val_interval != 0)

    def seconds_left(self, done: int) -> float:
        if not self.recent:
            return 0.0
        train = sum(self.recent) / len(self.recent) * (self.max_iters - done)
        return train + (self.val_seconds or 0.0) * self.validations_after(done)


@HOOKS.register_module()
class EtaTimerHook(IterTimerHook):
    """mmengine's IterTimerHook (``time`` and ``data_time`` of every iteration) with the run's ETA from :class:`Eta`.
    ``window``: training iterations averaged."""

    def __init__(self, window: int = 20):
        super().__init__()
        self.window = window
        self.eta: Eta | None = None
        self._val_start = 0.0

    def before_train(self, runner) -> None:
        super().before_train(runner)
        loop = runner.train_loop
        self.eta = Eta(runner.max_iters, getattr(loop, 'val_interval', None), getattr(loop, 'val_begin', 1),
                       self.window)

    def before_val(self, runner) -> None:
        self._val_start = time.time()

    def after_val(self, runner) -> None:
        if self.eta is not None:  # a validation inside training (before_train made the estimator)
            self.eta.add_validation(time.time() - self._val_start)
        self.t = time.time()  # the next training iteration's time starts now, not before validation

    def after_save_checkpoint(self, runner, path) -> None:
        self.t = time.time()  # writing a checkpoint is not an iteration's time (ZooRunner calls this point)

    def _after_iter(self, runner, batch_idx, data_batch=None, outputs=None, mode: str = 'train') -> None:
        super()._after_iter(runner, batch_idx, data_batch, outputs, mode)
        if mode == 'train' and self.eta is not None:
            if runner.iter > self.start_iter:  # the first iteration after a (re)start carries its set-up costs
                self.eta.add_iteration(runner.message_hub.get_scalar('train/time').current())
            if self.eta.recent:
                runner.message_hub.update_info('eta', self.eta.seconds_left(runner.iter + 1))


@HOOKS.register_module()
class ProgressLoggerHook(LoggerHook):
    """mmengine's LoggerHook that also logs a summary before training, iterations 1, 2, 5, 10, ... below
    ``interval`` (see :func:`early_log_points`), and the last iteration."""

    def before_train(self, runner) -> None:
        runner.logger.info(run_summary(runner))
        self._early = {runner.iter + n for n in early_log_points(self.interval)}

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        done = runner.iter + 1
        extra = done in getattr(self, '_early', ()) or done == runner.max_iters  # the last one is always shown
        if extra and not self.every_n_inner_iters(batch_idx, self.interval):
            tag, log_str = runner.log_processor.get_log_after_iter(runner, batch_idx, 'train')
            runner.logger.info(log_str)
            runner.visualizer.add_scalars(tag, step=runner.iter + 1, file_path=self.json_log_path)
            return
        super().after_train_iter(runner, batch_idx, data_batch, outputs)
