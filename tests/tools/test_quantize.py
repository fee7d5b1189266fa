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


def conv_mlp(path):
    """'b 3 h w' -> Conv 3x3 (8 channels) -> Relu -> per-pixel MatMul (8 -> 4): both kinds --static quantizes."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(2)
    nodes = [helper.make_node('Conv', ['image', 'wc'], ['c'], pads=[1, 1, 1, 1]),
             helper.make_node('Relu', ['c'], ['r']),
             helper.make_node('Transpose', ['r'], ['t'], perm=[0, 2, 3, 1]),
             helper.make_node('MatMul', ['t', 'w2'], ['m']),
             helper.make_node('Transpose', ['m'], ['seg_logits'], perm=[0, 3, 1, 2])]
    graph = helper.make_graph(
        nodes, 'conv_mlp', [helper.make_tensor_value_info('image', TensorProto.FLOAT, ['b', 3, 'h', 'w'])],
        [helper.make_tensor_value_info('seg_logits', TensorProto.FLOAT, ['b', 4, 'h', 'w'])],
        initializer=[numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), 'wc'),
                     numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), 'w2')])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)]), str(path))
    return path


def calibration():
    return [np.random.default_rng(i).standard_normal((1, 3, 8, 8)).astype(np.float32) for i in range(2)]


def test_static_int8_never_deletes_a_source_or_a_neighbour_named_like_its_staging_file(tmp_path):
    """--static staged '<out stem>.static.onnx' and deleted it: the source model.static.onnx with --out model.onnx
    was deleted (then FileNotFoundError), and an unrelated other.static.onnx beside --out other.onnx silently."""
    from heads.export.quantize import quantize_static
    source = conv_mlp(tmp_path / 'model.static.onnx')
    before = source.read_bytes()
    target = quantize_static(source, tmp_path / 'model.onnx', calibration())
    assert source.read_bytes() == before
    assert op_counts(target)['MatMulInteger'] == 1 and op_counts(target)['QuantizeLinear'] > 0
    neighbour = tmp_path / 'other.static.onnx'
    neighbour.write_bytes(b'a file of the user')
    quantize_static(source, tmp_path / 'other.onnx', calibration())
    assert neighbour.read_bytes() == b'a file of the user'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['model.onnx', 'model.static.onnx', 'other.onnx',
                                                          'other.static.onnx']  # no staging file left


@pytest.mark.parametrize('how', ['same path', 'symlink', 'hard link', 'dotted path'])
def test_an_int8_target_that_is_the_source_is_refused_and_the_source_kept(tmp_path, how):
    import os

    from heads.export.quantize import quantize_static
    source = conv_mlp(tmp_path / 'model.onnx')
    before = source.read_bytes()
    target = {'same path': source, 'symlink': tmp_path / 'link.onnx', 'hard link': tmp_path / 'hard.onnx',
              'dotted path': tmp_path / 'sub' / '..' / 'model.onnx'}[how]
    (tmp_path / 'sub').mkdir()
    if how == 'symlink':
        target.symlink_to(source)
    elif how == 'hard link':
        os.link(source, target)
    with pytest.raises(ValueError, match='is the fp32 source'):
        quantize_dynamic(source, target)
    with pytest.raises(ValueError, match='is the fp32 source'):
        quantize_static(source, target, calibration())
    assert source.read_bytes() == before


def test_the_tool_refuses_an_out_or_json_that_is_an_input_before_writing(tmp_path, capsys):
    """tools/quantize.py --out MODEL replaced the fp32 file by the int8 one (exit 0), and --benchmark then timed
    int8 against itself."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location('quantize_tool', Path(__file__).parents[2] / 'tools/quantize.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    source = conv_mlp(tmp_path / 'model.onnx')
    before = source.read_bytes()
    for argv in ([str(source), '--out', str(source), '--benchmark', '1'],
                 [str(source), '--out', str(tmp_path / 'int8.onnx'), '--json', str(source)],
                 [str(source), '--out', str(tmp_path / 'x.json'), '--json', str(tmp_path / 'x.json')]):
        with pytest.raises(SystemExit) as exit_:
            tool.main(argv)
        assert exit_.value.code == 2
        assert 'Nothing was written' in capsys.readouterr().err
    assert source.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ['model.onnx']
