"""What the backbone families share: image sizes, the levels a backbone taps (which ones, and the contract
attributes that follow from them: :func:`select_taps`), and running blocks and stages in sequence."""
from __future__ import annotations

import torch


def pair(size) -> tuple[int, int]:
    """An int or (h, w) as (h, w)."""
    return (size, size) if isinstance(size, int) else tuple(size)


def tap_indices(out_indices, default, count: int, what: str, distinct: bool = False) -> tuple[int, ...]:
    """``out_indices`` (or ``default`` when None) as non-negative increasing indices into ``count`` levels.

    Negative indices count from the end; repeats are allowed unless ``distinct``. Anything else raises a
    ValueError naming the accepted range (``what`` says what is indexed: 'block', 'stage', ...).
    """
    taps = tuple(default if out_indices is None else out_indices)
    taps = tuple(i + count if i < 0 else i for i in taps)
    ordered = sorted(set(taps)) if distinct else sorted(taps)
    if not taps or any(not 0 <= i < count for i in taps) or list(taps) != ordered:
        raise ValueError(f"out_indices must be {'distinct ' if distinct else ''}increasing {what} indices in "
                         f"[0, {count}), got {out_indices}")
    return taps


def select_taps(backbone, out_indices, default, levels, channels, strides, what: str, distinct: bool = False,
                first_level: int = 0) -> tuple[int, ...]:
    """Tap ``out_indices`` (or ``default`` when None) of ``backbone``'s levels: checked and normalised by
    :func:`tap_indices`, the levels past the deepest tap dropped from ``levels`` (the ModuleList running them), and
    the contract's ``out_indices``, ``out_channels``, ``out_strides`` and ``input_multiple`` (the deepest tap's
    stride) set from level i's ``channels[i]`` and ``strides[i]``. ``first_level``: the levels before ``levels[0]``
    that are not in it (CoAtNet's stem, level 0). Returns the taps."""
    taps = tap_indices(out_indices, default, len(levels) + first_level, what, distinct)
    del levels[max(taps) + 1 - first_level:]
    backbone.out_indices = taps
    backbone.out_channels = [channels[i] for i in taps]
    backbone.out_strides = [strides[i] for i in taps]
    backbone.input_multiple = strides[max(taps)]
    return taps


def check_drop_path_rate(rate) -> float:
    """A backbone's ``drop_path_rate`` as a float: the one check of it on its way to the blocks (through
    :func:`drop_path_rates`, or LeViT's constant rate). Anything but a number in [0, 1) is a ValueError naming it."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
        raise ValueError(f"drop_path_rate must be a number in [0, 1) (the stochastic-depth probability of the last "
                         f"block), got {rate!r}")
    return float(rate)


def drop_path_rates(rate: float, depths) -> list[list[float]]:
    """Stochastic depth rising linearly from 0 at the first block to ``rate`` at the last, over all stages, split
    into one list per stage of ``depths`` (the rule of timm's hierarchical models; one stage: the ViT's). ``rate`` is
    checked by :func:`check_drop_path_rate`. Plain floats: no tensor is made, so models build on the meta device
    too."""
    rate = check_drop_path_rate(rate)
    total = sum(depths)
    flat = [rate * i / max(total - 1, 1) for i in range(total)]
    starts = [sum(depths[:i]) for i in range(len(depths))]
    return [flat[start:start + depth] for start, depth in zip(starts, depths)]


def run_stages(stages, *state) -> list[tuple]:
    """Each stage's output, a tuple (tokens or map, then its grid or prefix tokens); the first stage takes ``state``,
    each later one the output of the stage before it."""
    outputs = []
    for stage in stages:
        state = stage(*state)
        outputs.append(state)
    return outputs


def run_blocks(blocks, x: torch.Tensor, grid) -> torch.Tensor:
    """Tokens 'b n d' through ``blocks`` in turn, each given the token grid (h, w)."""
    for block in blocks:
        x = block(x, grid)
    return x
