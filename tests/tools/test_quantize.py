"""heads.export.quantize: dynamic int8 of the Linears of an ONNX file keeps it close to fp32 and keeps its task
metadata (fast: a two-Linear token MLP written with onnx.helper, the layout of a ViT block's MLP in an export)."""
import numpy as np
import pytest

from heads.export.metadata import read_metadata, stored_metadata, write_metadata
from heads.export.quantize import ImageBatches, op_counts, quantize_dynamic

pytest.importorskip('onnxruntime')
onnx = pytest.importorskip('onnx')


def token_mlp(path, w1, w2):
    """'b 3 h w' -> per pixel relu(x W1) W2 -> 'b k h w' (Transpose, MatMul, Relu, MatMul, Transpose)."""
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node('Transpose', ['image'], ['t'], perm=[0, 2, 3, 1]),
             helper.make_node('MatMul', ['t', 'w1'], ['a']), helper.make_node('Relu', ['a'], ['r']),
             helper.make_node('MatMul', ['r', 'w2'], ['m']),
             helper.make_node('Transpose', ['m'], ['seg_logits'], perm=[0, 3, 1, 2])]
    graph = helper.make_graph(
        nodes, 'mlp', [helper.make_tensor_value_info('image', TensorProto.FLOAT, ['b', 3, 'h', 'w'])],
        [helper.make_tensor_value_info('seg_logits', TensorProto.FLOAT, ['b', w2.shape[1], 'h', 'w'])],
        initializer=[numpy_helper.from_array(w1, 'w1'), numpy_helper.from_array(w2, 'w2')])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)]), str(path))
    return path


def test_dynamic_int8_linears_stay_close_and_keep_the_metadata(tmp_path):
    from heads.export import run_onnx
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((3, 64)).astype(np.float32)
    w2 = (rng.standard_normal((64, 5)) / 8).astype(np.float32)
    source = token_mlp(tmp_path / 'mlp.onnx', w1, w2)
    write_metadata(source, {'task': 'Segmentor', 'output': 'seg_logits'})
    target = quantize_dynamic(source, tmp_path / 'mlp_int8.onnx')
    assert op_counts(target)['MatMulInteger'] == 2 and op_counts(target)['MatMul'] == 0
    meta = stored_metadata(target)  # not read_metadata: this graph's metadata is deliberately minimal
    assert meta['task'] == 'Segmentor' and meta['quantization']['kind'] == 'dynamic int8'
    x = rng.standard_normal((2, 3, 8, 12)).astype(np.float32)
    expected = np.maximum(x.transpose(0, 2, 3, 1) @ w1, 0) @ w2  # the float maths, by hand
    fp32, = run_onnx(source, x)
    int8, = run_onnx(target, x)
    assert np.allclose(fp32, expected.transpose(0, 3, 1, 2), atol=1e-5)
    # the error of 8-bit weights and activations: a few quantization steps of the output's range, not zero
    error = np.abs(int8 - fp32).max() / np.abs(fp32).max()
    assert 1e-5 < error < 0.03, error
    assert (int8.argmax(1) == fp32.argmax(1)).mean() > 0.95


def test_calibration_reader_serves_each_batch_once_then_rewinds():
    batches = [np.zeros((1, 3, 4, 4)), np.ones((1, 3, 4, 4))]
    reader = ImageBatches(batches)
    served = [reader.get_next(), reader.get_next(), reader.get_next()]
    assert served[0]['image'].sum() == 0 and served[1]['image'].sum() == 48 and served[2] is None
    assert served[0]['image'].dtype == np.float32
    reader.rewind()
    assert reader.get_next()['image'].sum() == 0


def test_a_file_without_metadata_still_quantizes(tmp_path):
    rng = np.random.default_rng(1)
    source = token_mlp(tmp_path / 'bare.onnx', rng.standard_normal((3, 8)).astype(np.float32),
                       rng.standard_normal((8, 2)).astype(np.float32))
    target = quantize_dynamic(source, tmp_path / 'bare_int8.onnx')
    assert op_counts(target)['MatMulInteger'] == 2
    with pytest.raises(ValueError, match='carries no task metadata'):
        read_metadata(target)
