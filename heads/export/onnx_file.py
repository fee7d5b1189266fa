"""Opening an ONNX file as an exported task model without trusting it: its protobuf parsed (:func:`load_proto`), its
external weight data kept inside its folder (:func:`check_external_data`), its graph's input and outputs read
(:func:`graph_outputs`, :func:`check_image_input`), its onnxruntime session made and run (:func:`open_session`,
:func:`run_session`). Whatever is wrong with the file is an :class:`OnnxFileError` naming it and the part that is
wrong, never a protobuf or onnxruntime traceback.
"""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath

EXPORT_AGAIN = 'export it again with tools/export_model.py --config CONFIG --checkpoint CKPT --out FILE'
EXTERNAL = 1  # onnx.TensorProto.EXTERNAL: the tensor's bytes lie in another file


class OnnxFileError(ValueError):
    """An ONNX file that cannot be opened or run as an exported task model (damaged, truncated, not ONNX, its task
    metadata wrong, its weights outside its folder): the message names the file and what is wrong in it."""


def _onnxruntime_errors() -> tuple[type[Exception], ...]:
    """The exception classes onnxruntime raises (its pybind module's, and RuntimeError for the rest)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state
    found = [v for v in vars(state).values() if isinstance(v, type) and issubclass(v, Exception)]
    return (*found, RuntimeError)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:300]


def load_proto(path):
    """The ONNX file ``path`` parsed (``onnx.ModelProto``, external data not read); an :class:`OnnxFileError` if it
    is not an ONNX model (truncated, damaged, another format, empty)."""
    import onnx
    from google.protobuf.message import DecodeError
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ONNX file {path} does not exist")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, UnicodeDecodeError, RecursionError) as err:
        raise OnnxFileError(f"{path} is not an ONNX model: it does not parse as one ({_first_line(err)}): it is "
                            f"truncated, damaged or of another format; copy it again or {EXPORT_AGAIN}") from err
    graph = proto.graph
    if not proto.ir_version or not graph.node or not graph.input or not graph.output:
        raise OnnxFileError(f"{path} is not an ONNX model: it parses but holds no graph to run (ir_version "
                            f"{proto.ir_version}, {len(graph.node)} nodes, {len(graph.input)} inputs, "
                            f"{len(graph.output)} outputs): it is empty, truncated or of another format; copy it "
                            f"again or {EXPORT_AGAIN}")
    return proto


def _dims(value) -> list[int | None]:
    """A graph input's or output's dims: an int where fixed, None where dynamic (or unknown)."""
    return [d.dim_value if d.HasField('dim_value') else None for d in value.type.tensor_type.shape.dim]


def graph_outputs(proto) -> dict[str, list[int | None]]:
    """{output name: dims} of the file's graph."""
    return {o.name: _dims(o) for o in proto.graph.output}


def check_image_input(path, proto) -> list[int]:
    """The graph's (first non-weight) input must be an image batch 'b 3 H W'; returns what its height and width
    must be multiples of where the graph says (the exporter names a dynamic size '32*s39'), else 1."""
    weights = {t.name for t in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in weights]
    dims = _dims(inputs[0]) if inputs else []
    if len(dims) != 4 or dims[1] not in (None, 3):
        shape = ' x '.join('?' if d is None else str(d) for d in dims) or 'none'
        raise OnnxFileError(f"{path}: the graph's input must be an image batch 'b 3 H W', got "
                            f"{inputs[0].name if inputs else 'no input'!r} of shape {shape}; this is not a file "
                            f"written by this project's export: {EXPORT_AGAIN}")
    dims = inputs[0].type.tensor_type.shape.dim
    found = [re.fullmatch(r'(\d+)\*\w+', dims[i].dim_param) for i in (2, 3)]
    return [int(m.group(1)) if m else 1 for m in found]


def _node_tensors(nodes):
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField('t'):
                yield attr.t
            yield from attr.tensors
            for sparse in [attr.sparse_tensor, *attr.sparse_tensors]:
                yield sparse.values
                yield sparse.indices
            for graph in [attr.g, *attr.graphs]:
                yield from _graph_tensors(graph)


def _graph_tensors(graph):
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def check_external_data(path, proto) -> None:
    """Every tensor the file stores outside itself (onnx's external data, beside big exports) must name a file in
    the ONNX file's folder (no absolute path, no '..', no link out of it) that exists and holds its bytes."""
    path = Path(path)
    folder = path.resolve().parent
    tensors = [*_graph_tensors(proto.graph), *(t for f in proto.functions for t in _node_tensors(f.node))]
    for tensor in tensors:
        if tensor.data_location != EXTERNAL:
            continue
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get('location', '')
        where = f"{path}: weight {tensor.name!r} is stored outside the file"
        parts = set(PurePosixPath(location).parts) | set(PureWindowsPath(location).parts)
        if not location or PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute() \
                or PureWindowsPath(location).drive or '..' in parts:
            raise OnnxFileError(f"{where}, at location {location!r}, which is not a file name in its folder "
                                f"{folder} (an absolute path or one with '..' could make the model read any file); "
                                f"{EXPORT_AGAIN}, and keep the file and its .data file together")
        target = folder / location
        if not target.resolve().is_relative_to(folder):
            raise OnnxFileError(f"{where}, in {location!r}, which links out of its folder {folder} (to "
                                f"{target.resolve()}); copy the data file itself beside the ONNX file")
        if not target.is_file():
            raise OnnxFileError(f"{where}, in {location!r}, which is missing from its folder {folder}; copy "
                                f"{location} beside it (export writes the two together)")
        size = target.stat().st_size
        try:
            offset = int(entries.get('offset', 0))
            length = int(entries.get('length', size - offset))
        except ValueError as err:
            raise OnnxFileError(f"{where}, in {location!r}, at offset {entries.get('offset')!r} / length "
                                f"{entries.get('length')!r}, which are not whole numbers; {EXPORT_AGAIN}") from err
        if offset < 0 or length < 0 or offset + length > size:
            raise OnnxFileError(f"{where}: its bytes {offset} to {offset + length} are not inside {location} "
                                f"({size} bytes): the data file is truncated or not this file's; copy it again "
                                f"or {EXPORT_AGAIN}")


def onnx_session(path, threads: int | None = None):
    """An onnxruntime session on the CPU provider for the ONNX file ``path`` (``threads``: intra-op threads,
    default onnxruntime's)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=['CPUExecutionProvider'])


def open_session(path, threads: int | None = None):
    """`onnx_session` for the file ``path``, onnxruntime's refusal as an :class:`OnnxFileError`."""
    try:
        return onnx_session(path, threads)
    except _onnxruntime_errors() as err:
        raise OnnxFileError(f"{path}: onnxruntime cannot load it ({_first_line(err)}): the file is damaged or "
                            f"was not written by this project's export; {EXPORT_AGAIN}") from err


def run_session(path, session, names: list[str], feeds: dict):
    """``session.run(names, feeds)``, onnxruntime's failure as an :class:`OnnxFileError` naming ``path``."""
    try:
        return session.run(names, feeds)
    except _onnxruntime_errors() as err:
        shapes = ', '.join(f"{k} {'x'.join(map(str, v.shape))}" for k, v in feeds.items())
        raise OnnxFileError(f"{path}: onnxruntime fails running it on {shapes} ({_first_line(err)}): the file "
                            f"is damaged or its graph does not take this size; {EXPORT_AGAIN}") from err
