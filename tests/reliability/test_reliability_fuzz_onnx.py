"""Issue 51 item 11: a bounded fuzz of opening exported ONNX files (hypothesis: derandomized, fixed example counts).

Two random tiny DPTs (a segmentor and a metric depth model) exported once, and a small hand-written graph with a
mask model's outputs carrying an EoMT's metadata, are opened by ``heads.export.load_onnx_model`` after

- their task metadata is changed: 1 to 3 fields (top level, ``preprocessor.*``, ``test_cfg.*``) deleted or set
  to JSON values of other types and ranges (strings such as "false", 0, negative and huge numbers, NaN, lists of
  the wrong length, objects), or the whole entry replaced (not an object, JSON cut short);
- their bytes are damaged: cut short, a bit flipped or a run of bytes replaced near the start (the graph's
  nodes), the end (outputs and metadata) or anywhere (mostly weights), or random bytes.

Every outcome must be a model that predicts an image of the right size (prediction as ``heads.Predictor`` runs it:
the keep-ratio resize by ``predict_scale``, the file's preprocessing and test_cfg) or an ``OnnxFileError`` naming
the file, never another exception; the count of inputs, loads and refusals is counted from the cases run, printed
at the end of the module (``-s``) and asserted.
"""
import collections
import json

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from heads.export import load_onnx_model
from heads.export.metadata import task_metadata

from ..reporting import show
from ..tools.onnx_files import export_tiny, mask_onnx, stored, with_metadata
from .test_reliability_fuzz import FUZZ

pytest.importorskip('onnxruntime')
onnx = pytest.importorskip('onnx')

EXAMPLES = {'ONNX metadata fields': 300, 'ONNX file bytes': 200}
COUNTS: collections.Counter = collections.Counter()
NAME = 'fuzzed.onnx'  # what every refusal must name

FIELDS = ['version', 'task', 'relative', 'output', 'outputs', 'num_classes', 'input_multiple', 'predict_scale',
          'classes', 'palette', 'preprocessor', 'preprocessor.mean', 'preprocessor.std', 'preprocessor.size_divisor',
          'preprocessor.pad_val', 'preprocessor.bgr_to_rgb', 'preprocessor.extra', 'test_cfg', 'test_cfg.mode',
          'test_cfg.flip', 'test_cfg.padding', 'test_cfg.crop_size', 'test_cfg.stride', 'test_cfg.overlap',
          'test_cfg.ramp', 'test_cfg.tasks', 'test_cfg.top_k', 'test_cfg.mask_threshold', 'test_cfg.stuff_classes']
# values a field may be set to: other types, edge and huge numbers, and the valid values of other fields
PLAIN = st.one_of(
    st.none(), st.booleans(), st.sampled_from([0, 1, -1, 2, 16, 32, 64, 3, 11, 255, 256, 100000, 2 ** 31, 10 ** 30]),
    st.integers(-5, 70), st.sampled_from([0.0, 0.5, 1.0, -1.0, 1e-9, 58.4, 1e308, float('nan'), float('inf')]),
    st.sampled_from(['false', 'true', 'whole', 'slide', 'tile', 'crop', 'resize', 'cosine', 'semantic', 'panoptic',
                     'instance', 'Segmentor', 'DepthEstimator', 'MaskClassifier', 'seg_logits', 'depth',
                     'class_logits', '', '32', 'ünï', '../x']))
VALUES = st.recursive(PLAIN, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(['mode', 'mean', 'std', 'a']), inner, max_size=2), max_leaves=8) | st.sampled_from([
        [64, 64], [32, 96], [64, 32], [96, 64], [1, 1], [123.7, 116.3, 103.5], [58.4, 57.1, 57.4], [0, 0, 0],
        [[0, 0, 0]] * 12, [[255, 0, 128]] * 11, [[0, 0]] * 11, [[0, 0, 256]] * 11, ['a', 'b'],
        ['class_logits', 'mask_logits'], ['mask_logits', 'class_logits'], ['semantic', 'panoptic'], [0, 1]])


def _set(meta: dict, field: str, value) -> None:
    *parents, last = field.split('.')
    inner = meta
    for key in parents:
        if not isinstance(inner.get(key), dict):
            return
        inner = inner[key]
    if value is _DELETE:
        inner.pop(last, None)
    else:
        inner[last] = value


_DELETE = object()


@st.composite
def metadata_cases(draw, bases):
    """(base name, the metadata text to store): the base's metadata with fields changed, or replaced whole."""
    base = draw(st.sampled_from(sorted(bases)))
    meta = json.loads(json.dumps(bases[base]))
    whole = draw(st.sampled_from(['fields'] * 8 + ['value', 'cut']))
    if whole == 'value':
        return base, json.dumps(draw(VALUES))
    for field in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)):
        _set(meta, field, draw(st.just(_DELETE) | VALUES))
    text = json.dumps(meta)
    if whole == 'cut':
        text = text[:draw(st.integers(0, len(text) - 1))]
    return base, text


@st.composite
def byte_cases(draw, datas):
    """(base name, damaged bytes): cut short, bits flipped or bytes replaced near the start, the end or anywhere."""
    base = draw(st.sampled_from(sorted(datas)))
    data = bytearray(datas[base])
    kind = draw(st.sampled_from(['cut', 'flip', 'flip', 'replace', 'random']))
    if kind == 'random':
        return base, draw(st.binary(max_size=2000))
    region = draw(st.sampled_from(['start', 'end', 'anywhere']))
    low, high = {'start': (0, min(len(data), 65536)), 'end': (max(0, len(data) - 16384), len(data)),
                 'anywhere': (0, len(data))}[region]
    at = draw(st.integers(low, high - 1))
    if kind == 'cut':
        return base, bytes(data[:at])
    if kind == 'flip':
        for _ in range(draw(st.integers(1, 3))):
            data[at] ^= 1 << draw(st.integers(0, 7))
            at = min(high - 1, at + draw(st.integers(0, 64)))
        return base, bytes(data)
    run = draw(st.binary(min_size=1, max_size=16))
    data[at:at + len(run)] = run
    return base, bytes(data)


@pytest.fixture(scope='module', autouse=True)
def _report(request):
    yield
    counts = ', '.join(f"{reader}: {COUNTS[reader]} ({COUNTS[reader, 'loaded']} loaded and predicted, "
                       f"{COUNTS[reader, 'refused']} refused)" for reader in EXAMPLES if COUNTS[reader])
    show(request, f"fuzz: inputs tried: {counts}; {sum(COUNTS[r] for r in EXAMPLES)} in all; raw exceptions: none")


@pytest.fixture(scope='module')
def bases(tmp_path_factory):
    """{name: ONNX file with task metadata}: tiny DPTs exported (seg, metric depth) and a mask graph with an EoMT's
    metadata."""
    from mmengine.config import Config

    import heads
    root = tmp_path_factory.mktemp('onnx_fuzz_bases')
    files = {task: export_tiny(task, root / f'{task}.onnx') for task in ('seg', 'metric')}
    cfg = Config.fromfile('configs/eomt_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=2)
    cfg.update(num_queries=4, num_blocks=1)
    meta = {**task_metadata(heads.MODELS.build(cfg)), 'predict_scale': [96, 64], 'classes': ['sky'] * 11,
            'palette': [[10, 20, 30]] * 11, 'test_cfg': {'mode': 'whole', 'tasks': ['semantic', 'panoptic']}}
    files['mask'] = with_metadata(mask_onnx(root / 'mask_bare.onnx', 4, 11), root / 'mask.onnx', meta)
    return files


def opened_or_refused(path, reader: str) -> None:
    """Open ``path`` and predict a 50x70 picture, or get an OnnxFileError naming it; count which."""
    image = np.random.default_rng(0).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    try:
        model = load_onnx_model(path, threads=1)
        prediction = predict(model, image)
    except ValueError as err:
        if type(err).__name__ != 'OnnxFileError' or NAME not in str(err):
            raise
        COUNTS[reader, 'refused'] += 1
    else:
        assert prediction.shape[:2] == image.shape[:2]
        COUNTS[reader, 'loaded'] += 1
    COUNTS[reader] += 1


def predict(model, image: np.ndarray) -> np.ndarray:
    """What heads.Predictor does with a picture (keep-ratio resize by predict_scale, preprocessing, the model's own
    prediction), the first result its task gives, at the picture's size."""
    from mmengine.structures import BaseDataElement

    from heads.io.images import keep_ratio_size
    original = image.shape[:2]
    if model.predict_scale:
        h, w = keep_ratio_size(*original, model.predict_scale)
        image = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    data = {'inputs': [torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))],
            'data_samples': [BaseDataElement(metainfo={'ori_shape': original})]}
    data = model.data_preprocessor(data, training=False)
    with torch.no_grad():
        sample = model(data['inputs'], data['data_samples'], mode='predict')[0]
    for key in ('pred_sem_seg', 'pred_panoptic_seg', 'pred_depth'):
        if key in sample:
            return sample.get(key).data[0].cpu().numpy()
    return sample.pred_instances.masks[0].cpu().numpy() if len(sample.pred_instances.masks) else np.zeros(original)


@pytest.mark.slow
def test_fuzz_onnx_metadata_fields_load_or_are_refused_naming_the_file(bases, tmp_path_factory):
    reader = 'ONNX metadata fields'
    folder = tmp_path_factory.mktemp('onnx_fuzz_meta')
    metadata = {name: stored(path) for name, path in bases.items()}
    before = COUNTS[reader]

    @settings(max_examples=EXAMPLES[reader], **FUZZ)
    @given(case=metadata_cases(metadata))
    def fuzz(case):
        base, text = case
        opened_or_refused(with_metadata(bases[base], folder / NAME, text), reader)

    fuzz()
    assert COUNTS[reader] - before >= 0.9 * EXAMPLES[reader]
    assert COUNTS[reader, 'refused'] > COUNTS[reader] / 2 and COUNTS[reader, 'loaded'] > 0


@pytest.mark.slow
def test_fuzz_onnx_file_bytes_load_or_are_refused_naming_the_file(bases, tmp_path_factory):
    reader = 'ONNX file bytes'
    folder = tmp_path_factory.mktemp('onnx_fuzz_bytes')
    datas = {name: path.read_bytes() for name, path in bases.items()}
    before = COUNTS[reader]

    @settings(max_examples=EXAMPLES[reader], **FUZZ)
    @given(case=byte_cases(datas))
    def fuzz(case):
        base, data = case
        (folder / NAME).write_bytes(data)
        opened_or_refused(folder / NAME, reader)

    fuzz()
    assert COUNTS[reader] - before >= 0.9 * EXAMPLES[reader]
    assert COUNTS[reader, 'refused'] > 0 and COUNTS[reader, 'loaded'] > 0

