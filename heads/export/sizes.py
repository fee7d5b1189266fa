"""Which input sizes a model accepts: the multiple its maps need, the smallest side an export traces for."""
from __future__ import annotations

import math

from torch import nn

from .wrappers import MapOutputs, TensorOutputs


def _inner(model: nn.Module) -> nn.Module:
    return model.model if isinstance(model, (MapOutputs, TensorOutputs)) else model  # the wrapped model


def map_strides(model: nn.Module) -> tuple[list[int], list[int]]:
    """(strides that must tile the input exactly, every stride the model computes a map at).

    A zoo backbone: its ``out_strides`` (and ``patch_size``); a PyramidBackbone: its body's and its pyramid's
    strides, the max-pooled level (``pooled_last_level``, ceil-sized) only in the second list; a DPT task model:
    its backbone's strides and the neck's levels (backbone stride / neck factor), where fusion adds each level
    to the x2 upsampled coarser one.
    """
    model = _inner(model)
    body = getattr(model, 'body', None) or getattr(model, 'backbone', None)
    strides = [*getattr(body, 'out_strides', []), getattr(body, 'patch_size', None), getattr(model, 'patch_size', None)]
    pooled = []
    if body is not None and hasattr(getattr(model, 'neck', None), 'factors'):  # DPT: one level per backbone map
        strides += [s / f for s, f in zip(body.out_strides, model.neck.factors)]
    if hasattr(model, 'out_strides'):
        own = list(model.out_strides)
        if getattr(model, 'pooled_last_level', False):
            own, pooled = own[:-1], own[-1:]
        strides += own
    exact = sorted({int(s) for s in strides if s})
    return exact, sorted(set(exact + pooled))


def required_multiple(model: nn.Module) -> int:
    """The number input height and width must be multiples of: the least common multiple of the strides that
    tile the input exactly (32 for a ViT/16 pyramid or DPT, 16 for a CvT pyramid)."""
    exact, _ = map_strides(model)
    if not exact:
        raise ValueError(f"cannot tell which input multiple {type(_inner(model)).__name__} needs (no out_strides "
                         f"or patch_size); pass multiple=")
    return math.lcm(*exact)


def min_side(model: nn.Module, multiple: int | None = None) -> int:
    """The smallest side an exported program accepts: the first multiple at which the coarsest map is at least
    2 wide. A side-1 map would specialise the trace (torch.export treats sizes 0 and 1 as constants)."""
    multiple = multiple or required_multiple(model)
    _, every = map_strides(model)
    coarsest = max(every, default=multiple)
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
