"""ONNX export (torch.onnx's dynamo exporter, from the torch.export program) and a check with onnxruntime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.export import ExportedProgram

from .program import export_program
from .sizes import check_size, required_multiple
from .wrappers import exportable

SINGLE_FILE_BYTES = 1800 * 2 ** 20  # weights above this go to PATH.data (protobuf files are limited to 2 GiB)


def export_onnx(model: nn.Module, path, example_size=(64, 96), opset: int | None = None,
                multiple: int | None = None, program: ExportedProgram | None = None) -> Path:
    """Write ``model`` (see :func:`heads.export.export_program`) to the ONNX file ``path`` with a dynamic height
    and width; returns the path. Input 'image' '1 3 H W', outputs named by the wrapper ('seg_logits', 'depth',
    'stride4', ...). ``opset``: the ONNX opset (default: the exporter's). ``program``: an
    :func:`export_program` of this model to translate instead of tracing it again (``example_size`` and
    ``multiple`` are then unused).

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
    return path


def onnx_session(path, threads: int | None = None):
    """An onnxruntime session on the CPU provider for the ONNX file ``path`` (``threads``: intra-op threads,
    default onnxruntime's)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=['CPUExecutionProvider'])


def run_onnx(model, x: torch.Tensor | np.ndarray) -> list[np.ndarray]:
    """The outputs of an ONNX model (a file path or an :func:`onnx_session`) for one 'b 3 h w' input."""
    session = model if hasattr(model, 'run') else onnx_session(model)
    x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x
    return session.run(None, {session.get_inputs()[0].name: x.astype(np.float32)})


@torch.no_grad()
def compare_onnx(path, model: nn.Module, sizes, seed: int = 0,
                 threads: int | None = None) -> dict[tuple[int, int], float]:
    """{(h, w): max abs difference} between onnxruntime and PyTorch (eval mode) over all outputs, on a random
    normal '1 3 h w' input per size. Sizes must be multiples of :func:`heads.export.required_multiple`; an
    output whose shape differs from PyTorch's raises RuntimeError. ``threads``: onnxruntime's intra-op threads."""
    module = exportable(model)
    multiple = required_multiple(module)
    sizes = [check_size(size, multiple) for size in sizes]
    session, generator, diffs = onnx_session(path, threads), torch.Generator().manual_seed(seed), {}
    for size in sizes:
        x = torch.randn(1, 3, *size, generator=generator)
        param = next(module.parameters())
        expected = module(x.to(param.device, param.dtype))
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        got = run_onnx(session, x)
        shapes = [tuple(e.shape) for e in expected], [g.shape for g in got]
        if shapes[0] != shapes[1]:
            raise RuntimeError(f"at input {size[0]}x{size[1]} ONNX output shapes {shapes[1]} differ from "
                               f"PyTorch's {shapes[0]}")
        diffs[size] = max(float(np.abs(e.float().cpu().numpy() - g).max()) for e, g in zip(expected, got))
    return diffs
