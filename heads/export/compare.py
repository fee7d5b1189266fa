"""How far an exported model's outputs are from eager PyTorch's, at chosen input sizes."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from .wrappers import exportable


def _as_arrays(outputs) -> list[np.ndarray]:
    outputs = [outputs] if isinstance(outputs, (torch.Tensor, np.ndarray)) else list(outputs)
    return [o.detach().float().cpu().numpy() if isinstance(o, torch.Tensor) else o for o in outputs]


def _output_pairs(model: nn.Module, run: Callable, sizes, seed: int):
    """(size, PyTorch's outputs, ``run``'s outputs) per size, one random normal '1 3 h w' input each; an output
    whose shape differs from PyTorch's raises RuntimeError."""
    module = exportable(model)
    param = next(module.parameters())
    generator = torch.Generator().manual_seed(seed)
    for size in sizes:
        x = torch.randn(1, 3, *size, generator=generator).to(param.device, param.dtype)
        expected, got = _as_arrays(module(x)), _as_arrays(run(x))
        shapes = [e.shape for e in expected], [g.shape for g in got]
        if shapes[0] != shapes[1]:
            raise RuntimeError(f"at input {size[0]}x{size[1]} the exported output shapes {shapes[1]} differ from "
                               f"PyTorch's {shapes[0]}")
        yield tuple(size), expected, got


@torch.no_grad()
def max_abs_diffs(model: nn.Module, run: Callable, sizes, seed: int = 0) -> dict[tuple[int, int], float]:
    """{(h, w): max abs difference over all outputs} between ``model`` (eval mode, see :func:`exportable`) and
    ``run`` (an exported form: '1 3 h w' tensor -> its outputs) on one random normal input per size; an output
    whose shape differs from PyTorch's raises RuntimeError."""
    return {size: max(float(np.abs(e - g).max()) for e, g in zip(expected, got))
            for size, expected, got in _output_pairs(model, run, sizes, seed)}


@torch.no_grad()
def relative_diffs(model: nn.Module, run: Callable, sizes, seed: int = 0) -> dict[tuple[int, int], list[float]]:
    """{(h, w): per output, max |difference| / max |PyTorch's|}, as :func:`max_abs_diffs` takes them."""
    return {size: [float(np.abs(e - g).max() / max(float(np.abs(e).max()), 1e-12)) for e, g in zip(expected, got)]
            for size, expected, got in _output_pairs(model, run, sizes, seed)}
