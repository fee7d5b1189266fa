"""torch.export of a model with a dynamic input height and width."""
from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim, ExportedProgram

from .compare import max_abs_diffs
from .sizes import check_size, min_side, required_multiple
from .wrappers import exportable


def dynamic_hw(multiple: int, minimum: int, maximum: int) -> tuple[dict, ...]:
    """``dynamic_shapes`` for one 'b 3 h w' input: h and w derived dims ``multiple * k``, minimum <= side <= maximum."""
    lo = minimum // multiple
    hi = max(maximum // multiple, lo + 1)
    return ({2: multiple * Dim('h', min=lo, max=hi), 3: multiple * Dim('w', min=lo, max=hi)},)


def example_input(module: nn.Module, size) -> torch.Tensor:
    """A random '1 3 h w' image on the device and in the dtype of the module's parameters."""
    param = next(module.parameters())
    return torch.randn(1, 3, *size, device=param.device, dtype=param.dtype)


def export_program(model: nn.Module, example_size=(64, 96), multiple: int | None = None,
                   max_side: int = 4096) -> ExportedProgram:
    """``torch.export.export`` of ``model`` (wrapped by :func:`heads.export.exportable`, so in eval mode) traced
    at ``example_size`` (h, w), with a dynamic height and width: any multiple of ``multiple`` (default and
    smallest allowed: :func:`heads.export.required_multiple`) from :func:`heads.export.min_side` to ``max_side``.
    Batch size 1.

    ``program.module()(x)`` then runs '1 3 H W' inputs of those sizes (its guards reject others). An example
    size that is not a multiple, or below the smallest side, raises ValueError.
    """
    module = exportable(model)
    needed = required_multiple(module)
    multiple = multiple or needed
    if multiple % needed:
        raise ValueError(f"multiple={multiple} is not a multiple of {needed}, which this model's maps need")
    minimum = min_side(module, multiple)
    check_size(example_size, multiple, minimum)
    return torch.export.export(module, (example_input(module, example_size),),
                               dynamic_shapes=dynamic_hw(multiple, minimum, max_side), strict=False)


def compare_program(program: ExportedProgram, model: nn.Module, sizes, seed: int = 0) -> dict[tuple[int, int], float]:
    """{(h, w): max abs difference} between the program's module and eager PyTorch
    (:func:`heads.export.max_abs_diffs`)."""
    return max_abs_diffs(model, program.module(), sizes, seed)
