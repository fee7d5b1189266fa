"""ONNX export (torch.onnx's dynamo exporter, from the torch.export program) and a check with onnxruntime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.export import ExportedProgram

from .compare import max_abs_diffs, relative_diffs
from .metadata import task_metadata, write_metadata
from .onnx_file import onnx_session
from .program import INPUT_DIMS, export_program
from .sizes import check_size, required_multiple
from .wrappers import ClipOutputs, TensorOutputs, exportable

SINGLE_FILE_BYTES = 1800 * 2 ** 20  # weights above this go to PATH.data (protobuf files are limited to 2 GiB)


def export_onnx(model: nn.Module, path, example_size=None, opset: int | None = None,
                multiple: int | None = None, program: ExportedProgram | None = None,
                metadata: dict | None = None) -> Path:
    """Write ``model`` (see :func:`heads.export.export_program`) to the ONNX file ``path`` with a dynamic batch,
    height and width; returns the path. Input 'image' 'b 3 H W', outputs named by the wrapper ('seg_logits', 'depth',
    'stride4', ...). ``opset``: the ONNX opset (default: the exporter's). ``program``: an
    :func:`export_program` of this model to translate instead of tracing it again (``example_size`` and
    ``multiple`` are then unused). A task model's file carries its task metadata
    (:mod:`heads.export.metadata`: preprocessing, inference strategy) updated with ``metadata`` (e.g.
    :func:`heads.export.metadata.config_metadata`); a backbone's carries ``metadata`` if given.

    The dynamo exporter translates the same torch.export program that :func:`export_program` returns, so its
    dynamic dims are the program's symbolic sizes (the legacy TorchScript exporter is deprecated and would
    need ``dynamic_axes`` re-derived by hand).
    """
    module = exportable(model)
    program = program if program is not None else export_program(module, example_size, multiple)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = sum(p.numel() * p.element_size() for p in module.parameters())
    torch.onnx.export(program, (), str(path), dynamo=True, input_names=['image'], output_names=module.output_names,
                      opset_version=opset, external_data=size > SINGLE_FILE_BYTES, verbose=False)
    fixed = onnx_fixed_dims(path)
    if fixed:  # the translator's decompositions fixed a size the program kept dynamic
        _remove(path)
        raise ValueError(f"the ONNX translation of {type(module.model).__name__} fixed the input's "
                         f"{', '.join(fixed)} (some operation's decomposition computes from the traced size); "
                         f"refused rather than written for one size only ({path} removed)")
    problem = other_size_problem(path, module, program)
    if problem:  # dynamic inputs, but some size inside the graph was folded to its traced value
        _remove(path)
        raise ValueError(f"the ONNX graph of {type(module.model).__name__} does not run as PyTorch at another size "
                         f"than the traced one: {problem}; some size inside the graph was kept at its traced value "
                         f"(a guard on a dynamic size, a decomposition indexing at the traced size); refused "
                         f"({path} removed)")
    task = task_metadata(module.model) if isinstance(module, (TensorOutputs, ClipOutputs)) else {}
    if task or metadata:
        write_metadata(path, {**task, **(metadata or {})})
    return path


def _remove(path: Path) -> None:
    path.unlink()
    path.with_name(path.name + '.data').unlink(missing_ok=True)


def other_size(program: ExportedProgram, module: nn.Module) -> tuple[int, int, int]:
    """(batch, h, w) other than the traced input's and allowed by the program: batch 1 (the trace's is 2), one
    multiple taller (the multiple read from the program's symbolic height, e.g. 32*s0)."""
    name = program.graph_signature.user_inputs[0]
    shape = next(n for n in program.graph.nodes if n.op == 'placeholder' and n.name == name).meta['val'].shape
    h, w = (int(s.node.hint) if isinstance(s, torch.SymInt) else int(s) for s in shape[2:])
    height = shape[2]
    multiple = int(height.node.expr.as_coeff_Mul()[0]) if isinstance(height, torch.SymInt) else 0
    return 1, h + (multiple or required_multiple(module)), w


def other_size_problem(path, module: nn.Module, program: ExportedProgram, tolerance: float = 1e-3) -> str | None:
    """None if onnxruntime runs the file at :func:`other_size` with PyTorch's output shapes and values (max
    |difference| <= ``tolerance`` x max |PyTorch's| per output; exact exports are far closer), else what differs.
    Cheap (one small input) and catches a graph whose inputs are dynamic but whose inside is not."""
    batch, h, w = other_size(program, module)
    session = onnx_session(path)
    try:
        errors = relative_diffs(module, lambda x: run_onnx(session, x), [(h, w)])[(h, w)]
    except Exception as error:  # onnxruntime's own failure (a reshape to the traced size, a gather out of range)
        return f"onnxruntime fails at {batch}x3x{h}x{w}: {str(error).strip().splitlines()[0][:300]}"
    for name, error in zip(module.output_names, errors):
        if error > tolerance:
            return f"at {batch}x3x{h}x{w} output {name} differs by {error:.3g} of its scale"
    return None


def onnx_fixed_dims(path) -> list[str]:
    """The names ('batch', 'height', 'width') of the dimensions the ONNX file's image input holds fixed: a number,
    or a symbol that is a number (the translator names a dimension the program specialised by its value: '28')."""
    import onnx
    dims = onnx.load(str(path), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    return [name for name, i in INPUT_DIMS if not dims[i].dim_param or dims[i].dim_param.isdigit()]


def run_onnx(model, x: torch.Tensor | np.ndarray) -> list[np.ndarray]:
    """The outputs of an ONNX model (a file path or an :func:`onnx_session`) for one 'b 3 h w' input."""
    session = onnx_session(model) if isinstance(model, (str, Path)) else model
    x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x
    return session.run(None, {session.get_inputs()[0].name: x.astype(np.float32)})


def compare_onnx(path, model: nn.Module, sizes, seed: int = 0,
                 threads: int | None = None) -> dict[tuple[int, int], float]:
    """{(h, w): max abs difference} between onnxruntime and PyTorch (:func:`heads.export.max_abs_diffs`). Sizes
    must be multiples of :func:`heads.export.required_multiple`. ``threads``: onnxruntime's intra-op threads."""
    multiple = required_multiple(exportable(model))
    sizes = [check_size(size, multiple) for size in sizes]
    session = onnx_session(path, threads)
    return max_abs_diffs(model, lambda x: run_onnx(session, x), sizes, seed)
