"""Which input sizes a model accepts: the multiple its maps need, the smallest side an exported program runs at, and
the smallest side an export may be traced at (:func:`trace_side`; the tool's default trace size, :func:`trace_size`).

Read from the model's own description: a zoo backbone or detection pyramid (:mod:`zoo.contract`: ``input_multiple``,
``coarsest_stride``), or a DPT task model (:class:`heads.models.dense_model.DenseModel`, the same two properties);
windowed attention (:class:`zoo.core.ShiftedWindowAttention`: Swin) from the windows and the grids of its maps.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from zoo.core import ShiftedWindowAttention

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


def window_strides(model: nn.Module, multiple: int) -> list[tuple[tuple[int, int], int]]:
    """(window, stride of its map) of every :class:`zoo.core.ShiftedWindowAttention` in ``model``, read by running
    it once on a small image (batch 1, side :func:`min_side`) and recording each attention's map; [] (and no run)
    for a model without one."""
    module = exportable(model)
    attentions = [m for m in module.modules() if isinstance(m, ShiftedWindowAttention)]
    if not attentions:
        return []
    side, seen = min_side(module, multiple), {}

    def record(attention, args, kwargs) -> None:  # forward(x, grid): the grid of its map
        seen.setdefault(attention, args[1] if len(args) > 1 else kwargs['grid'])

    hooks = [m.register_forward_pre_hook(record, with_kwargs=True) for m in attentions]
    param = next(module.parameters())
    try:
        with torch.no_grad():
            module(torch.zeros(1, 3, side, side, device=param.device, dtype=param.dtype))
    finally:
        for hook in hooks:
            hook.remove()
    return [(m.window, round(side / int(grid[0]))) for m, grid in seen.items()]


def trace_side(model: nn.Module, multiple: int | None = None) -> int:
    """The smallest side an export may be traced at: :func:`min_side`, or larger where windowed attention needs
    it: every window-attention map wider than its window on both sides (ceil(side / stride) > window: a map of
    one window a side would fix that count in the trace, torch.export treating sizes 1 as constants; Swin-T's
    window 7 at stride 32: 256)."""
    multiple = multiple or required_multiple(model)
    side = min_side(model, multiple)
    for window, stride in window_strides(model, multiple):
        side = max(side, multiple * (max(window) * stride // multiple + 1))
    return side


def trace_size(model: nn.Module, multiple: int | None = None) -> tuple[int, int]:
    """The size an export traces at unless told otherwise: (:func:`trace_side`, the next multiple at which the
    coarsest map is wider than it is high), non-square down to the coarsest map (sides that differ keep the trace
    from relating height and width: Depth Anything's 42x56 has a 2x2 coarsest map at stride 28, whose equal sides
    let a reshape by the map's height and width fix the height; 42x70 has 2x3). One multiple wider where the
    multiple is the coarsest stride (ViT/16: 32x48)."""
    multiple = multiple or required_multiple(model)
    side = trace_side(model, multiple)
    coarsest = exportable(model).model.coarsest_stride
    width = side + multiple
    while math.ceil(width / coarsest) == math.ceil(side / coarsest):
        width += multiple
    return side, width


def check_trace_size(size, multiple: int, minimum: int, smallest: int) -> tuple[int, int]:
    """``size`` (h, w) as ints if an export may be traced at it (:func:`check_size`, sides >= ``minimum``, the
    :func:`trace_side`), else a ValueError in one line naming the size to use. ``smallest``: the
    :func:`min_side` (the trace side is larger only for windowed attention)."""
    h, w = check_size(size, multiple, smallest)
    if min(h, w) < minimum:
        raise ValueError(f"input size {h}x{w} is below the smallest side {minimum} an export of this model traces at "
                         f"(every window-attention map must be wider than its window, or the trace fixes the count "
                         f"of windows); trace at e.g. {max(h, minimum)}x{max(w, minimum + multiple)}")
    return h, w
