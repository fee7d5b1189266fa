"""Training budgets for comparisons: equal iterations (the config's schedule), equal training FLOPs, or equal
training time, so that a backbone 3x slower than another is not given 3x the compute (``tools/compare.py
--budget``).

- ``iters``: every backbone runs the config's ``train_cfg.max_iters``; ``iters:N``: every one runs N iterations (a
  short run of a longer recipe, its schedule rescaled as below).
- ``flops:T``: each runs ``round(T * 1e12 / flops_per_iter)`` iterations, where one iteration costs
  3 x (2 x MACs of one image at the training crop) x batch: the forward's multiply-adds, and a backward of twice
  the forward (the usual estimate; Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1).
  Machine-independent, so it is the default budget for a fair comparison of architectures.
- ``time:S``: each runs ``round(S / seconds_per_iter)`` iterations, with the seconds of one forward + backward of a
  random batch at the crop timed on this machine (median of 3 after a warm-up; data loading and the optimizer step
  are not counted). Depends on the machine and on what else runs on it.

The schedule is rescaled with the iteration count: validation and checkpoint intervals longer than the new length
become the new length, every scheduler that ran to the old end runs to the new one, and a schedule shorter than
a scheduler's start keeps what fits: a scheduler that would begin at or after the new end is dropped (a warm-up of 50
iterations in a 20-iteration run is cut to 20, and the decay after it never starts), one that ends later ends there.
"""
from __future__ import annotations

import copy

import torch

from heads.registry import MODELS
from zoo.profiling import count_macs

from .dense import median_seconds, train_fn

KINDS = ('iters', 'flops', 'time')


def parse_budget(spec: str) -> tuple[str, float | None]:
    """'iters' | 'flops:TFLOP' | 'time:SECONDS' -> (kind, amount)."""
    kind, _, amount = spec.partition(':')
    if kind not in KINDS:
        raise ValueError(f"unknown budget {spec!r}: use iters, flops:TFLOP (e.g. flops:50) or time:SECONDS "
                         f"(e.g. time:600)")
    if kind == 'iters' and not amount:
        return kind, None
    try:
        value = float(amount)
    except ValueError:
        value = -1.0
    if kind == 'iters' and not (value >= 1 and value == int(value)):
        raise ValueError(f"budget {spec!r}: iters takes a whole number of iterations, e.g. iters:100 (or plain "
                         f"'iters': each config's train_cfg.max_iters)")
    if not value > 0:
        raise ValueError(f"budget {spec!r} needs a positive amount after the colon, e.g. {kind}:"
                         f"{'50' if kind == 'flops' else '600'}")
    return kind, value


def training_flops_per_iter(cfg, crop: tuple[int, int]) -> float:
    """3 x 2 x MACs(one image at ``crop``) x batch size (see the module docstring)."""
    model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    macs = count_macs(model, torch.randn(1, 3, *crop))
    return 6.0 * macs * cfg.train_dataloader.batch_size


def step_seconds(cfg, crop: tuple[int, int], repeats: int = 3) -> float:
    """Median seconds of a forward + backward of a random training batch at ``crop`` (after one warm-up)."""
    model = MODELS.build(copy.deepcopy(cfg.model)).train()
    x = torch.randn(cfg.train_dataloader.batch_size, 3, *crop)
    return median_seconds(train_fn(model, x, 'fp32'), x.device, repeats, warmup=1)


def set_iterations(cfg, iters: int) -> None:
    """Give ``cfg`` a schedule of ``iters`` iterations in place (intervals and schedulers follow; see the module
    docstring)."""
    old = cfg.train_cfg.max_iters
    cfg.train_cfg.max_iters = iters
    if cfg.train_cfg.get('val_interval', 0) > iters:
        cfg.train_cfg.val_interval = iters
    checkpoint = cfg.get('default_hooks', {}).get('checkpoint')
    if checkpoint is not None and checkpoint.get('interval', 0) > iters:
        checkpoint.interval = iters
    schedulers = cfg.get('param_scheduler') or []
    kept = []
    for scheduler in schedulers if isinstance(schedulers, list) else [schedulers]:
        if scheduler.get('by_epoch', True) is False:
            if scheduler.get('begin', 0) >= iters:
                continue  # it would start after the run ends (mmengine refuses begin >= end)
            if scheduler.get('end', old) >= old or scheduler.get('end', old) > iters:
                scheduler['end'] = iters
        kept.append(scheduler)
    if 'param_scheduler' in cfg:
        cfg.param_scheduler = kept


def budget_iterations(cfg, crop: tuple[int, int], budget: tuple[str, float | None]) -> dict:
    """The iterations ``cfg`` gets under ``budget``, with what they were derived from (for the table)."""
    kind, amount = budget
    if kind == 'iters':
        return {'iters': cfg.train_cfg.max_iters if amount is None else int(amount)}
    if kind == 'flops':
        per_iter = training_flops_per_iter(cfg, crop)
        return {'iters': max(1, round(amount * 1e12 / per_iter)), 'train_TFLOP_per_iter': per_iter / 1e12}
    per_iter = step_seconds(cfg, crop)
    return {'iters': max(1, round(amount / per_iter)), 'train_s_per_iter': per_iter}
