"""The batch a recipe is defined for, on any number of processes: gradient accumulation (mmengine's
``accumulative_counts``) makes up what the processes lack, and the schedule is kept in optimizer steps.

A config sets ``effective_batch_size`` (e.g. mmseg's 16 = 8 GPUs x 2 images). With P processes of
``train_dataloader.batch_size`` b, each optimizer step accumulates A = 16 / (P b) iterations; the config's
iteration counts (``train_cfg.max_iters`` and ``val_interval``, the checkpoint and logger intervals) are read as
optimizer steps and multiplied by A for the loop, which counts iterations; the learning-rate schedule is stepped
once per optimizer step (:class:`StepParamSchedulerHook`), so it is the recipe's, step for step. Batches that do
not divide 16 are refused, saying which settings would. Without ``effective_batch_size`` nothing changes.

``sync_bn`` ('torch'): mmengine converts BatchNorm to SyncBatchNorm in distributed runs; torch's SyncBatchNorm
needs CUDA, so a distributed CPU run keeps per-process BatchNorm (and says so). With accumulation BatchNorm still
normalises over the images of one iteration (P b), not over the effective batch.
"""
from __future__ import annotations

import os

import torch
from mmengine.hooks import ParamSchedulerHook

from ...registry import HOOKS
from ..config.values import positive_int

#: The config's iteration counts that are optimizer steps of the effective batch, scaled for the loop.
STEP_COUNTS = (('train_cfg', 'max_iters'), ('train_cfg', 'val_interval'), ('default_hooks.checkpoint', 'interval'),
               ('default_hooks.logger', 'interval'))


@HOOKS.register_module()
class StepParamSchedulerHook(ParamSchedulerHook):
    """mmengine's ParamSchedulerHook that steps iteration-based schedulers only after iterations where the
    optimizer updated the parameters (every one without accumulation)."""

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        should_update = getattr(runner.optim_wrapper, 'should_update', None)
        if should_update is None or should_update():
            super().after_train_iter(runner, batch_idx, data_batch, outputs)


def world_size_of(cfg) -> int:
    """The number of training processes ``cfg`` runs with (its launcher, the distributed group or torchrun's env)."""
    if cfg.get('launcher', 'none') == 'none':
        return 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return int(os.environ.get('WORLD_SIZE', 1))


def _node(cfg, dotted: str):
    node = cfg
    for part in dotted.split('.'):
        node = node.get(part) if node is not None else None
    return node


def apply_effective_batch(cfg, world_size: int) -> str | None:
    """Set up ``cfg`` (in place) for its ``effective_batch_size`` on ``world_size`` processes; returns the line
    that says how (None without ``effective_batch_size``). Raises ValueError when the batch cannot be made up,
    :class:`~heads.engine.config.values.ConfigValueError` when it is not a whole number >= 1."""
    notes = []
    if cfg.get('sync_bn') and world_size > 1 and not torch.cuda.is_available():
        cfg.pop('sync_bn')
        notes.append("sync_bn dropped: torch's SyncBatchNorm needs CUDA, BatchNorm stays per process on CPU")
    total = cfg.get('effective_batch_size')
    positive_int(total, 'effective_batch_size', 'images per optimizer step over all processes, e.g. 16',
                 none_means='train at the batch of train_dataloader.batch_size x processes')
    if total is None or not cfg.get('train_dataloader'):  # nothing to train (tools/test.py on a test-only config)
        return '; '.join(notes) or None
    per_process = cfg.train_dataloader.batch_size
    per_iter = world_size * per_process
    if total % per_iter:
        options = [f'{p} process(es) x {total // p}' for p in (1, 2, 4, 8, 16) if total % p == 0]
        raise ValueError(
            f"effective_batch_size={total} cannot be made of {world_size} process(es) x {per_process} images "
            f"(train_dataloader.batch_size): {per_iter} does not divide {total}. Use a process count and batch "
            f"size whose product divides it, e.g. {', '.join(options)} images, or set effective_batch_size=None "
            f"to train at batch {per_iter}")
    steps = total // per_iter
    cfg.optim_wrapper.accumulative_counts = steps
    scaled = []
    if steps > 1:
        for where, key in STEP_COUNTS:
            node = _node(cfg, where)
            if node is not None and node.get(key):
                node[key] = node[key] * steps
                scaled.append(f'{where}.{key} {node[key] // steps} -> {node[key]}')
        cfg.default_hooks.param_scheduler = dict(type='StepParamSchedulerHook')
    how = (f'{world_size} process(es) x {per_process} images' +
           (f' x {steps} accumulated iterations (optim_wrapper.accumulative_counts={steps})' if steps > 1 else ''))
    line = f'effective batch {total} = {how}'
    if scaled:
        line += (f'; the config counts optimizer steps, the loop counts iterations: {", ".join(scaled)}; the '
                 f'learning-rate schedule steps once per optimizer step')
    if steps > 1 and (cfg.get('sync_bn') or notes):
        line += f'; BatchNorm normalises over the {per_iter} images of an iteration'
    return '; '.join([line, *notes])
