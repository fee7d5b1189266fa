"""int8 ONNX files for the CPU, through onnxruntime's quantization tools.

- :func:`quantize_dynamic`: the weights of the Linears (ONNX ``MatMul`` / ``Gemm`` with a constant weight: the
  qkv, projection and MLP layers of the ViT blocks, the DPT readout projections) stored as int8, each activation
  quantized to uint8 per call from its own range (``DynamicQuantizeLinear``, then ``MatMulInteger``). Nothing to
  calibrate. The attention products (q k^T, attn v: both operands activations) stay float, as do the convolutions:
  onnxruntime's dynamic ``ConvInteger`` has no fast CPU kernel, so convolutions are left to :func:`quantize_static`.
- :func:`quantize_static`: the ``Conv`` nodes (the DPT neck and head) as QDQ pairs with activation ranges calibrated
  on real images (min-max over :class:`ImageBatches`), which onnxruntime fuses into ``QLinearConv``. On a CPU
  without VNNI (an AVX2-only EPYC) onnxruntime's uint8 x int8 kernels add pairs of products in 16 bits
  (``vpmaddubsw``), which saturates on per-channel weights using all 8 bits: there the weights are quantized to 7 bits
  (``reduce_range``; a random DPT's class maps agreed with fp32 on 0.887 of one frame's pixels at 8 bits on such a
  CPU). The choice is made where the file is made and recorded in its ``quantization`` metadata.

Why onnxruntime's and not ``torch.ao.quantization.quantize_dynamic``: in torch 2.14 the latter still runs but warns
that ``torch.ao.quantization`` is deprecated (its successor, torchao, is not installed here), its quantized modules
do not translate to ONNX, and the file deployed is the ONNX one: quantizing that file is what is measured and
shipped. The task metadata (:mod:`heads.export.metadata`) is kept, with a ``quantization`` entry added.

Both write through a file of a unique temporary name in the target's folder (``mkstemp``), renamed over the target
once complete (the static path's intermediate file too, removed in every case): no other file of that folder is
written or deleted, and a target that is the source (the same path, a link to it, a hard link) is refused.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from .metadata import stored_metadata, write_metadata

LINEAR_OPS = ('MatMul', 'Gemm')
CONV_OPS = ('Conv',)


def quantize_dynamic(source, target, ops=LINEAR_OPS, per_channel: bool = False) -> Path:
    """Write ``target``: ``source`` with the weights of its ``ops`` (default the Linears) in int8, activations
    quantized dynamically (module docstring). ``per_channel``: one weight scale per output channel."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic
    source, target = _paths(source, target)
    with _staged(target, '.int8') as staged:
        ort_quantize_dynamic(str(source), str(staged), op_types_to_quantize=list(ops), per_channel=per_channel,
                             weight_type=QuantType.QInt8)
        _mark(source, staged, {'kind': 'dynamic int8', 'ops': list(ops), 'per_channel': per_channel})
    return target


class ImageBatches:
    """onnxruntime's calibration reader over preprocessed 'b 3 H W' float32 batches (all the same size)."""

    def __init__(self, batches, input_name: str = 'image'):
        self.batches, self.input_name, self.index = list(batches), input_name, 0

    def get_next(self):
        if self.index >= len(self.batches):
            return None
        self.index += 1
        return {self.input_name: np.ascontiguousarray(self.batches[self.index - 1], dtype=np.float32)}

    def rewind(self):
        self.index = 0


def cpu_has_vnni() -> bool:
    """Whether this CPU has VNNI (AVX512-VNNI or AVX-VNNI: 8-bit products summed in 32 bits), from /proc/cpuinfo
    (False where it cannot be read)."""
    try:
        flags = Path('/proc/cpuinfo').read_text()
    except OSError:
        return False
    return 'avx512_vnni' in flags or 'avx_vnni' in flags


def quantize_static(source, target, batches, ops=CONV_OPS, also_dynamic=LINEAR_OPS,
                    reduce_range: bool | None = None) -> Path:
    """Write ``target``: the ``ops`` of ``source`` (default its convolutions) statically quantized to int8 with
    activation ranges calibrated (min-max) on ``batches`` (preprocessed 'b 3 H W' arrays), then, if
    ``also_dynamic``, those ops dynamically quantized as :func:`quantize_dynamic` does. ``reduce_range``: 7-bit
    weights; None: where this CPU has no VNNI (module doc)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as ort_quantize_static
    source, target = _paths(source, target)
    reduce_range = not cpu_has_vnni() if reduce_range is None else reduce_range
    with _staged(target, '.int8') as written, _staged(target, '.static', keep=False) as static:
        ort_quantize_static(str(source), str(static if also_dynamic else written), ImageBatches(batches),
                            quant_format=QuantFormat.QDQ, op_types_to_quantize=list(ops),
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                            reduce_range=reduce_range, calibrate_method=CalibrationMethod.MinMax)
        if also_dynamic:
            from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic
            ort_quantize_dynamic(str(static), str(written), op_types_to_quantize=list(also_dynamic),
                                 weight_type=QuantType.QInt8)
        _mark(source, written, {'kind': 'static int8' + (' + dynamic' if also_dynamic else ''), 'ops': list(ops),
                                'dynamic_ops': list(also_dynamic or ()), 'calibration_batches': len(list(batches)),
                                'reduce_range': reduce_range})
    return target


def _paths(source, target) -> tuple[Path, Path]:
    """``source`` and ``target`` as paths; a ValueError when the target is the source (it would be replaced by its
    own quantized copy), by path, link or hard link."""
    source, target = Path(source), Path(target)
    same = source.resolve() == target.resolve()
    with contextlib.suppress(OSError):
        same = same or (target.exists() and os.path.samefile(source, target))
    if same:
        raise ValueError(f"the int8 file {target} is the fp32 source {source}: writing it would replace the source. "
                         f"Nothing was written; give the int8 file another path")
    return source, target


@contextlib.contextmanager
def _staged(target: Path, tag: str, keep: bool = True):
    """A new file of a unique name beside ``target`` (``<stem><tag>.<random>.partial.onnx``); on success and with
    ``keep`` it is renamed over ``target``, else (and on any error) it is removed. Nothing else is touched."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f'{target.stem}{tag}.', suffix='.partial.onnx', dir=target.parent)
    os.close(handle)
    staged = Path(name)
    try:
        yield staged
        if keep:
            os.chmod(staged, 0o666 & ~_umask())  # mkstemp's file is private (0600); the target gets the usual mode
            os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def op_counts(path) -> Counter:
    """How many nodes of each type the ONNX file's graph has (``MatMulInteger``, ``QuantizeLinear``, ...)."""
    import onnx
    return Counter(node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node)


def _mark(source: Path, target: Path, quantization: dict) -> None:
    """Copy the source's task metadata to the quantized file, with the quantization recorded."""
    metadata = stored_metadata(source)
    if metadata is not None:  # a backbone's file may have none: nothing to carry
        write_metadata(target, {**metadata, 'quantization': quantization})
