"""EoMT's two-stage warm-up and polynomial decay (Kerssies et al. 2025, its ``TwoStageWarmupPolySchedule``): the new
parameters warm up first while the pretrained backbone waits, then the backbone warms up, then each decays
polynomially to zero at the end of the run.

At optimizer step s of a run of T steps, warm-ups (w1, w2), power p, for a group whose initial rate is r:

- a group outside the backbone: ``r s / w1`` while s < w1 (none when w1 = 0), then
  ``r (1 - (s - w1) / (T - w1)) ** p``;
- a backbone group: 0 while s < w1, ``r (s - w1) / w2`` while s < w1 + w2, then
  ``r (1 - (s - w1 - w2) / (T - w1 - w2)) ** p``.

The groups are told apart by name: those the optimizer constructor names ``<backbone>.…`` are the backbone's
(:class:`~heads.engine.switches.layer_decay.LayerDecayOptimWrapperConstructor` names each parameter's group); the
base rate mmengine's optimizer wrapper keeps for its log follows the new parameters.
"""
from __future__ import annotations

from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler

from ...registry import PARAM_SCHEDULERS


def two_stage_factor(step: int, total: int, warmup: tuple[int, int], power: float, backbone: bool) -> float:
    """The multiple of a group's initial rate at optimizer ``step`` (module docstring)."""
    first, second = warmup
    if not backbone:
        if first > 0 and step < first:
            return step / first
        return (1 - max(0, step - first) / max(1, total - first)) ** power
    if step < first:
        return 0.0
    if step < first + second:
        return (step - first) / second
    return (1 - max(0, step - first - second) / max(1, total - first - second)) ** power


@PARAM_SCHEDULERS.register_module()
class TwoStageWarmupPolyLR(LRSchedulerMixin, _ParamScheduler):
    """The learning rate of each group by :func:`two_stage_factor` (module docstring) over the steps from ``begin``
    to ``end`` (T = end - begin, optimizer steps: ``by_epoch=False``). ``warmup``: (w1, w2), the new parameters'
    and then the backbone's warm-up steps; ``power``: the decay's exponent; ``backbone``: the name prefix of the
    backbone's parameter groups."""

    def __init__(self, optimizer, warmup=(500, 1000), power: float = 0.9, backbone: str = 'backbone',
                 begin: int = 0, end: int = INF, last_step: int = -1, by_epoch: bool = False, verbose: bool = False):
        if end == INF or by_epoch:
            raise ValueError(f"TwoStageWarmupPolyLR decays to zero at a known optimizer step: give end (the run's "
                             f"max_iters) and by_epoch=False, got end={end}, by_epoch={by_epoch}")
        if len(warmup) != 2 or min(warmup) < 0 or sum(warmup) >= end - begin:
            raise ValueError(f"TwoStageWarmupPolyLR warmup must be (new parameters' steps, backbone's steps), both "
                             f">= 0 and together shorter than the run ({end - begin} steps), got {warmup!r}")
        groups = getattr(optimizer, 'param_groups', [])
        base = getattr(optimizer, 'base_param_settings', None)  # mmengine's wrapper: the base rate, for its log
        unnamed = [i for i, group in enumerate(groups) if 'name' not in group and group is not base]
        if unnamed:
            raise ValueError(f"TwoStageWarmupPolyLR tells the backbone's parameter groups by name, but groups "
                             f"{unnamed[:5]} have none: build the optimizer with "
                             f"constructor='LayerDecayOptimWrapperConstructor', which names every group")
        self.warmup, self.power = (int(warmup[0]), int(warmup[1])), float(power)
        self.in_backbone = [group.get('name', '').startswith(backbone + '.') for group in groups]
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step, by_epoch=by_epoch, verbose=verbose)

    def _get_value(self) -> list[float]:
        total = self.end - self.begin
        return [base * two_stage_factor(self.last_step, total, self.warmup, self.power, backbone)
                for base, backbone in zip(self.base_values, self.in_backbone)]
