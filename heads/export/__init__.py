"""Export backbones with their pyramid and the DPT task models to torch.export programs and ONNX, with a
dynamic input height and width (multiples of what the model needs, see :func:`required_multiple`)."""
from .onnx import compare_onnx, export_onnx, onnx_session, run_onnx
from .program import export_program
from .sizes import check_size, min_side, required_multiple
from .wrappers import MapOutputs, TensorOutputs, exportable

__all__ = ['MapOutputs', 'TensorOutputs', 'check_size', 'compare_onnx', 'export_onnx', 'export_program',
           'exportable', 'min_side', 'onnx_session', 'required_multiple', 'run_onnx']
