"""Export backbones with their pyramid and the task models (DPT, UperNet: one dense output; Mask2Former, EoMT: class
and mask logits) to torch.export programs and ONNX, with a dynamic batch, input height and width (multiples of what
the model needs, see :func:`required_multiple`)."""
from .compare import max_abs_diffs
from .metadata import config_metadata, read_metadata
from .onnx import compare_onnx, export_onnx, onnx_session, run_onnx
from .onnx_file import OnnxFileError
from .onnx_model import OnnxMaskModel, OnnxPredictor, OnnxTaskModel, load_onnx_model
from .program import compare_program, export_program
from .sizes import check_size, min_side, required_multiple
from .wrappers import MapOutputs, TensorOutputs, exportable

__all__ = ['MapOutputs', 'OnnxFileError', 'OnnxMaskModel', 'OnnxPredictor', 'OnnxTaskModel', 'TensorOutputs',
           'check_size', 'compare_onnx', 'compare_program', 'config_metadata', 'export_onnx', 'export_program',
           'exportable', 'load_onnx_model', 'max_abs_diffs', 'min_side', 'onnx_session', 'read_metadata',
           'required_multiple', 'run_onnx']
