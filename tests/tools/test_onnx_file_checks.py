"""Issue 51 item 11: an ONNX file's task metadata and bytes are outside input, checked when the file is opened
(``heads.export.load_onnx_model`` / ``read_metadata``). Each wrong field is refused naming the file and the field;
a truncated, empty or non-ONNX file, metadata that is not JSON, output names that are not the graph's, weights
stored outside the file's folder and a graph onnxruntime cannot load are each one ``OnnxFileError`` naming the file
(before: run silently wrong, an OOM kill, or a protobuf / JSON / onnxruntime traceback). One random tiny DPT is
exported per module (slow); its metadata is rewritten per case."""
import json
import shutil

import pytest
import torch

pytest.importorskip('onnxruntime')
onnx = pytest.importorskip('onnx')

from .onnx_files import changed, export_tiny, stored, with_metadata  # noqa: E402


@pytest.fixture(scope='module')
def seg_file(tmp_path_factory):
    """A random tiny DPT segmentor (11 classes, input multiple 32) exported with its metadata."""
    return export_tiny('seg', tmp_path_factory.mktemp('onnx_checks') / 'seg.onnx')


def load(path):
    from heads.export import load_onnx_model
    return load_onnx_model(path, threads=1)


def refused(path, match: str):
    """The error opening ``path``: an OnnxFileError whose message names the file and matches ``match``."""
    with pytest.raises(ValueError, match=match) as err:
        load(path)
    assert type(err.value).__name__ == 'OnnxFileError' and path.name in str(err.value)
    return err.value


def predicts(model) -> torch.Tensor:
    """A random 70x50 image (seed 0) through the model's preprocessor and prediction, as heads.Predictor runs it:
    its label map."""
    from mmengine.structures import BaseDataElement
    image = torch.randint(0, 256, (3, 70, 50), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    data = model.data_preprocessor({'inputs': [image], 'data_samples': [BaseDataElement()]}, training=False)
    sample = model(data['inputs'], data['data_samples'], mode='predict')[0]
    return sample.pred_sem_seg.data


# field -> (value, what the error says): each was accepted before and ran wrong, crashed later or exhausted memory
FIELDS = {
    'mean of two numbers': ('preprocessor.mean', [123.0, 116.0], r"'preprocessor.mean' must be three numbers"),
    'mean a string': ('preprocessor.mean', 'imagenet', r"'preprocessor.mean' must be three numbers"),
    'std 0': ('preprocessor.std', [58.4, 0, 57.4], r"'preprocessor.std' must be three numbers .* \[0.001, 10000\]"),
    'size_divisor 0': ('preprocessor.size_divisor', 0, r"'preprocessor.size_divisor' must be a whole number"),
    'bgr_to_rgb "false"': ('preprocessor.bgr_to_rgb', 'false', r"'preprocessor.bgr_to_rgb' must be true or false"),
    'unknown preprocessor key': ('preprocessor.sise_divisor', 32, r"'preprocessor' has unknown keys .'sise_divisor'"),
    'predict_scale 0': ('predict_scale', [0, 0], r"'predict_scale' must be a pair of whole numbers in \[1, 8192\]"),
    'predict_scale 100000': ('predict_scale', [100000, 100000], r"'predict_scale' must be a pair .*100000"),
    'predict_scale one number': ('predict_scale', [512], r"'predict_scale' must be a pair"),
    'input_multiple 0': ('input_multiple', 0, r"'input_multiple' must be a whole number in \[1, 2048\]"),
    'input_multiple huge': ('input_multiple', 2 ** 20, r"'input_multiple' must be a whole number in \[1, 2048\]"),
    'input_multiple not the graph\'s': ('input_multiple', 16, r"'input_multiple' is 16, but the graph takes heights "
                                                            r"and widths that are multiples of 32x32"),
    'input_multiple a string': ('input_multiple', '32', r"'input_multiple' must be a whole number .*\(str\)"),
    'unknown test_cfg.mode': ('test_cfg.mode', 'sliding', r"'test_cfg.mode' is refused: test_cfg mode must be "
                                                          r"'whole', 'slide' or 'tile', got 'sliding'"),
    'slide without stride': ('test_cfg.mode', 'slide', r"'test_cfg.crop_size' is refused: test_cfg mode='slide' "
                                                       r"needs crop_size and stride"),
    'crop_size not a pair': ('test_cfg.crop_size', 'big', r"'test_cfg.crop_size' must be a pair of whole numbers"),
    'flip "no"': ('test_cfg.flip', 'no', r"'test_cfg.flip' is refused: test_cfg flip must be True or False"),
    'relative "false"': ('relative', 'false', r"'relative' must be true or false \(a JSON boolean\), got 'false'"),
    'relative on a segmentor': ('relative', True, r"'relative' is true .* but the task is 'Segmentor'"),
    'task unknown': ('task', 'Classifier', r"'task' must be one of \['Segmentor', 'DepthEstimator', "),
    'task not the graph\'s': ('task', 'DepthEstimator', r"'output' must be 'depth' for a DepthEstimator"),
    'output not the graph\'s': ('output', 'logits', r"'output' must be 'seg_logits' for a Segmentor"),
    'palette of pairs': ('palette', [[0, 0]] * 11, r"'palette' must be a list of \[R, G, B\] colours"),
    'palette above 255': ('palette', [[0, 0, 300]] * 11, r"'palette' must be a list of \[R, G, B\] colours"),
    'palette a string': ('palette', 'viridis', r"'palette' must be a list of \[R, G, B\] colours"),
    'palette of floats': ('palette', [[0.5, 0, 0]] * 11, r"'palette' must be a list of \[R, G, B\] colours"),
    'palette too short': ('palette', [[1, 2, 3]] * 4, r"'palette' has 4 colours for 11 classes"),
    'classes not names': ('classes', [1, 2], r"'classes' must be a list of class names"),
    'version from the future': ('version', 99, r"'version' must be a whole number in \[1, 1\]"),
}


@pytest.mark.slow
@pytest.mark.parametrize('case', list(FIELDS))
def test_a_wrong_metadata_field_is_refused_naming_the_file_and_the_field(seg_file, tmp_path, case):
    field, value, match = FIELDS[case]
    path = with_metadata(seg_file, tmp_path / 'edited.onnx', changed(stored(seg_file), field, value))
    refused(path, rf"edited.onnx: task metadata field {match}")


@pytest.mark.slow
def test_a_task_whose_output_the_graph_lacks_is_refused(seg_file, tmp_path):
    """Before: a segmentation graph opened as a depth model ran its logits as depth (all-zero depth maps)."""
    meta = {**stored(seg_file), 'task': 'DepthEstimator', 'output': 'depth'}
    refused(with_metadata(seg_file, tmp_path / 'depth.onnx', meta),
            r"depth.onnx: its task metadata says DepthEstimator, whose output is 'depth', but the graph's outputs "
            r"are \['seg_logits'\]")


@pytest.mark.slow
def test_the_exported_file_loads_predicts_and_its_metadata_is_unchanged(seg_file, tmp_path):
    model = load(seg_file)
    assert model.palette[1] == [20, 235, 1] and model.predict_scale == (96, 64) and model.test_cfg['mode'] == 'whole'
    labels = predicts(model)
    assert labels.shape == (1, 70, 50) and 0 <= labels.min() and labels.max() < 11
    empty = with_metadata(seg_file, tmp_path / 'no_palette.onnx', {**stored(seg_file), 'palette': []})
    assert load(empty).palette is None  # no palette: the tools draw their default one


def damaged(seg_file, tmp_path, kind: str):
    data = seg_file.read_bytes()
    path = tmp_path / f'{kind}.onnx'
    if kind == 'truncated':
        path.write_bytes(data[:len(data) // 2])
    elif kind == 'text':
        path.write_text('model weights, see https://example.org\n')
    elif kind == 'empty':
        path.write_bytes(b'')
    elif kind == 'not JSON':
        with_metadata(seg_file, path, json.dumps(stored(seg_file))[:-40])
    elif kind == 'JSON list':
        with_metadata(seg_file, path, [1, 2])
    elif kind == 'unknown operator':
        proto = onnx.load(str(seg_file))
        proto.graph.node[len(proto.graph.node) // 2].op_type = 'NoSuchOperator'
        path.write_bytes(proto.SerializeToString())
    return path


DAMAGE = {'truncated': r"truncated.onnx is not an ONNX model: it does not parse as one",
          'text': r"text.onnx is not an ONNX model: it does not parse as one",
          'empty': r"empty.onnx is not an ONNX model: it parses but holds no graph to run",
          'not JSON': r"not JSON.onnx: its task metadata \(metadata_props key 'heads.task_model'\) is not valid JSON",
          'JSON list': r"JSON list.onnx: the task metadata under 'heads.task_model' must be a JSON object, got list",
          'unknown operator': r"unknown operator.onnx: onnxruntime cannot load it \(.*NoSuchOperator"}


@pytest.mark.slow
@pytest.mark.parametrize('kind', list(DAMAGE))
def test_a_damaged_file_is_one_error_naming_it(seg_file, tmp_path, kind):
    """Before: google.protobuf's DecodeError, json's JSONDecodeError, onnxruntime's InvalidGraph."""
    refused(damaged(seg_file, tmp_path, kind), DAMAGE[kind])


def with_external_data(seg_file, folder, location: str | None = None):
    """``seg_file`` saved in ``folder`` with its weights in 'seg.onnx.data' beside it; with ``location``, that data
    file moved there (relative to ``folder``, or absolute) and the file pointing at it."""
    folder.mkdir(parents=True, exist_ok=True)
    proto = onnx.load(str(seg_file))
    path = folder / 'seg.onnx'
    onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location='seg.onnx.data',
              size_threshold=1024)
    if location is not None:
        target = folder / location
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(folder / 'seg.onnx.data', target)
        proto = onnx.load(str(path), load_external_data=False)
        for tensor in proto.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == 'location':
                    entry.value = location
        path.write_bytes(proto.SerializeToString())
    return path


@pytest.mark.slow
@pytest.mark.parametrize('where', ['../seg.onnx.data', 'ABSOLUTE', 'sub/../../seg.onnx.data'])
def test_weights_stored_outside_the_files_folder_are_refused(seg_file, tmp_path, where):
    """Before: onnxruntime's Fail ('External data path escapes model directory') or, where a runtime does not check,
    any file read as weights."""
    location = str(tmp_path / 'elsewhere' / 'w.data') if where == 'ABSOLUTE' else where
    path = with_external_data(seg_file, tmp_path / 'model' / 'in', location)
    refused(path, r"seg.onnx: weight '.*' is stored outside the file, at location .*, which is not a file name in "
                  r"its folder")


@pytest.mark.slow
def test_weights_beside_the_file_load_and_a_missing_data_file_is_named(seg_file, tmp_path):
    path = with_external_data(seg_file, tmp_path / 'ok')
    assert torch.equal(predicts(load(path)), predicts(load(seg_file)))
    (tmp_path / 'ok' / 'seg.onnx.data').unlink()
    refused(path, r"seg.onnx: weight .* is stored outside the file, in 'seg.onnx.data', which is missing from its "
                  r"folder")
