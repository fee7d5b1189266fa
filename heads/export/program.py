"""torch.export of a model with a dynamic batch, input height and width; a trace that fixed any of them is refused."""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch
from torch import nn
from torch.export import Dim, ExportedProgram

from zoo.core import Attention, set_fused_attention

from .compare import max_abs_diffs
from .limits import refuse_inexact
from .sizes import check_trace_size, min_side, required_multiple, trace_side, trace_size
from .wrappers import MAX_BATCH, exportable

INPUT_DIMS = (('batch', 0), ('height', 2), ('width', 3))  # the dynamic dims of the 'b 3 h w' input


def dynamic_hw(multiple: int, minimum: int, maximum: int, max_batch: int = MAX_BATCH) -> tuple[dict, ...]:
    """``dynamic_shapes`` for one 'b 3 h w' input: b from 1 to ``max_batch`` (the wrapper's: an image model's
    :data:`~heads.export.wrappers.MAX_BATCH`, a video model's clip length); h and w derived dims ``multiple * k``,
    minimum <= side <= maximum."""
    lo = minimum // multiple
    hi = max(maximum // multiple, lo + 1)
    return ({0: Dim('batch', min=1, max=max_batch), 2: multiple * Dim('h', min=lo, max=hi),
             3: multiple * Dim('w', min=lo, max=hi)},)


def example_input(module: nn.Module, size, batch: int = 2) -> torch.Tensor:
    """A random 'batch 3 h w' image on the device and in the dtype of the module's parameters (batch 2: a batch
    of 1 would be traced as a constant)."""
    param = next(module.parameters())
    return torch.randn(batch, 3, *size, device=param.device, dtype=param.dtype)


def input_dims_fixed(program: ExportedProgram) -> list[str]:
    """The names ('batch', 'height', 'width') of the input dimensions ``program`` holds fixed."""
    name = program.graph_signature.user_inputs[0]
    shape = next(n for n in program.graph.nodes if n.op == 'placeholder' and n.name == name).meta['val'].shape
    return [name for name, i in INPUT_DIMS if isinstance(shape[i], int)]


def refuse_fixed_dims(program: ExportedProgram, model: nn.Module, step: str) -> ExportedProgram:
    """``program`` if its batch, height and width are still dynamic, else a ValueError naming the fixed ones:
    an export that silently runs one size only is refused."""
    fixed = input_dims_fixed(program)
    if fixed:
        raise ValueError(f"{step} of {type(exportable(model).model).__name__} fixed the input's {', '.join(fixed)}: "
                         f"some part of the model computes from the size in Python instead of in the graph, so the "
                         f"export would run at the traced size only; it is refused rather than written fixed")
    return program


@contextmanager
def explicit_attention(module: nn.Module):
    """Every :class:`zoo.core.Attention` of ``module`` computes softmax(q k^T * scale + bias) v explicitly (its
    unfused path, the same maths) while the block runs: the ONNX translator decomposes a traced
    ``scaled_dot_product_attention`` with an attention bias into a layout the following reshape does not expect
    (torch 2.14: "Cannot view a tensor ... as ..."), and ONNX has no fused attention to keep anyway."""
    before = [(m, m.__dict__.get('fused')) for m in module.modules() if isinstance(m, Attention)]
    set_fused_attention(module, False)
    try:
        yield module
    finally:
        for m, own in before:  # each back to what it was: its own setting, or its class's
            if own is None:
                m.__dict__.pop('fused', None)
            else:
                m.fused = own


@contextmanager
def constant_schedules(module: nn.Module):
    """Every EoMT in ``module`` reads its masked-attention probabilities as numbers while the block runs
    (:meth:`heads.models.eomt.EoMT.constant_probabilities`): which blocks mask is then fixed in the graph, as the
    model's own state, not the input's."""
    from ..models.eomt import EoMT
    with ExitStack() as stack:
        for part in module.modules():
            if isinstance(part, EoMT):
                stack.enter_context(part.constant_probabilities())
        yield module


def export_program(model: nn.Module, example_size=None, multiple: int | None = None,
                   max_side: int = 4096) -> ExportedProgram:
    """``torch.export.export`` of ``model`` (wrapped by :func:`heads.export.exportable`, so in eval mode) traced
    at ``example_size`` (h, w; default :func:`heads.export.sizes.trace_size`: the model's smallest trace side and
    one multiple wider), with a dynamic batch (1 to the wrapper's ``max_batch``), height and width: any multiple of
    ``multiple`` (default and smallest allowed: :func:`heads.export.required_multiple`) from
    :func:`heads.export.min_side` to ``max_side``.

    ``program.module()(x)`` then runs 'b 3 H W' inputs of those sizes (its guards reject others). An example
    size that is not a multiple, or below the smallest trace side (:func:`heads.export.sizes.trace_side`: larger
    than the smallest side for windowed attention), raises ValueError; so does a trace that fixed the batch,
    height or width (:func:`refuse_fixed_dims`), and a model with a part no dynamic-size export reproduces
    exactly (:func:`heads.export.limits.inexact_parts`).
    """
    module = exportable(model)
    refuse_inexact(module, type(module.model).__name__)
    needed = required_multiple(module)
    multiple = multiple or needed
    if multiple % needed:
        raise ValueError(f"multiple={multiple} is not a multiple of {needed}, which this model's maps need")
    minimum = min_side(module, multiple)
    if example_size is None:
        example_size = trace_size(module, multiple)
    else:
        check_trace_size(example_size, multiple, trace_side(module, multiple), minimum)
    with explicit_attention(module), constant_schedules(module):
        try:
            program = torch.export.export(module, (example_input(module, example_size),),
                                          dynamic_shapes=dynamic_hw(multiple, minimum, max_side, module.max_batch),
                                          strict=False)
        except torch._dynamo.exc.UserError as error:  # the trace fixed a size marked dynamic
            specialised = [line.strip() for line in str(error).splitlines() if 'specialized' in line]
            if not specialised:
                raise
            raise ValueError(f"torch.export of {type(module.model).__name__} fixed a dynamic input size: some part "
                             f"of the model computes from the size in Python (int(), a size-keyed cache, a branch) "
                             f"instead of in the graph, so it would run at the traced size only; refused. "
                             f"torch says: {' '.join(specialised)}") from error
    return refuse_fixed_dims(program, module, 'torch.export')


def compare_program(program: ExportedProgram, model: nn.Module, sizes, seed: int = 0) -> dict[tuple[int, int], float]:
    """{(h, w): max abs difference} between the program's module and eager PyTorch
    (:func:`heads.export.max_abs_diffs`)."""
    return max_abs_diffs(model, program.module(), sizes, seed)
