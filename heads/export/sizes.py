"""Which input sizes a model accepts: the multiple its maps need, the smallest side an export traces for.

Read from the model's own description: a zoo backbone or detection pyramid (:mod:`zoo.contract`: ``input_multiple``,
``coarsest_stride``), or a DPT task model (:class:`heads.models.dense_model.DenseModel`, the same two properties).
"""
from __future__ import annotations

from torch import nn

from .wrappers import exportable


def required_multiple(model: nn.Module) -> int:
    """The number input height and width must be multiples of (32 for a ViT/16 pyramid or DPT, 16 for a CvT
    pyramid)."""
    return exportable(model).model.input_multiple


def min_side(model: nn.Module, multiple: int | None = None) -> int:
    """The smallest side an exported program accepts: the first multiple at which the coarsest map is at least
    2 wide. A side-1 map would specialise the trace (torch.export treats sizes 0 and 1 as constants)."""
    multiple = multiple or required_multiple(model)
    coarsest = exportable(model).model.coarsest_stride
    return multiple * (coarsest // multiple + 1)


def check_size(size, multiple: int, minimum: int | None = None) -> tuple[int, int]:
    """``size`` (h, w) as ints, or a ValueError naming the size and the multiple (or the minimum) it misses."""
    h, w = (int(s) for s in size)
    if h <= 0 or w <= 0 or h % multiple or w % multiple:
        fit = lambda s: max(multiple, round(s / multiple) * multiple)  # noqa: E731
        raise ValueError(f"input size {h}x{w} is not a multiple of {multiple}, which this model needs; "
                         f"resize or pad it (e.g. to {fit(h)}x{fit(w)})")
    if minimum is not None and min(h, w) < minimum:
        raise ValueError(f"input size {h}x{w} is below the smallest side {minimum} an exported program of this "
                         f"model traces (its coarsest map must be at least 2x2); use sides >= {minimum}")
    return h, w
