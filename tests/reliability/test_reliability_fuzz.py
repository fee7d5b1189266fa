"""Issue 20: a bounded fuzz of the readers of untrusted input (hypothesis: derandomized, fixed example counts, so
CI runs the same inputs every time in about half a minute).

Every reader gets random bytes and damaged copies of real files: checkpoint files (zip and legacy torch
formats, pickles that would run code), safetensors headers, Hugging Face config.json, images and label maps, the
feature-store index. It must succeed or raise one of this project's errors naming the file, never a raw exception
from inside a library, and never run code: the crafted pickles and config values would create ``MARKER``. The
number of inputs each reader was given is printed at the end of the module (and asserted).
"""
import collections
import json
import os
import pickle
import shutil
import struct
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mmengine.config import Config
from PIL import Image
from safetensors.torch import save as safetensors_bytes

from heads.features import FeatureStore, FeatureStoreError
from heads.hf.config import HFConfigError, read_config_json
from heads.hf.dpt import model_config_from_hf
from heads.io.images import ImageError, read_rgb
from heads.registry import TRANSFORMS
from zoo.weights import CheckpointError, read_state_dict

from ..reporting import show
from .test_reliability_inputs import exported  # noqa: F401  (the fixture: a real feature export)

MARKER = Path(tempfile.gettempdir()) / f'zoo_fuzz_code_ran_{os.getpid()}'
EXAMPLES = {'checkpoint files': 500, 'safetensors headers': 250, 'HF config.json': 250, 'images and label maps': 500,
            'feature-store index': 300}
COUNTS: collections.Counter = collections.Counter()
OUTCOMES: collections.Counter = collections.Counter()  # (reader, 'read' | 'refused') for the report
FUZZ = dict(derandomize=True, deadline=None, database=None, print_blob=False,
            suppress_health_check=list(HealthCheck))


class RunsCode:
    """Unpickling this calls open(MARKER, 'w'): what a malicious file would do, made harmless and visible."""

    def __reduce__(self):
        return (open, (str(MARKER), 'w'))


@pytest.fixture(scope='module', autouse=True)
def _report(request):
    MARKER.unlink(missing_ok=True)
    yield
    outcomes = ', '.join(f"{reader}: {COUNTS[reader]} ({OUTCOMES[reader, 'read']} read, "
                         f"{OUTCOMES[reader, 'refused']} refused)" for reader in EXAMPLES if COUNTS[reader])
    show(request, f"fuzz: inputs tried per reader: {outcomes}; {sum(COUNTS.values())} in all; "
         f"code executed: {'YES' if MARKER.exists() else 'never'}")
    assert not MARKER.exists()


@pytest.fixture(scope='module')
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp('fuzz')


def tried(reader: str) -> None:
    COUNTS[reader] += 1


def outcome(reader: str, refused: bool) -> None:
    OUTCOMES[reader, 'refused' if refused else 'read'] += 1


def read_or_refused(reader: str, read, path, data: bytes, error: type[Exception]):
    """``data`` written to ``path``, then ``read(path)``, or None when it raised ``error`` with a message naming the
    file; counted either way."""
    tried(reader)
    path.write_bytes(data)
    try:
        result = read(path)
    except error as err:
        assert str(path) in str(err)
        outcome(reader, refused=True)
        return None
    outcome(reader, refused=False)
    return result


def damaged(seeds: list[bytes]):
    """A seed with up to 8 bytes replaced, optionally cut short, optionally with random bytes inserted."""
    def damage(args):
        seed, changes, cut, insert = args
        data = bytearray(seed)
        for position, value in changes:
            if data:
                data[position % len(data)] = value
        if insert is not None:
            where, extra = insert
            data[where % (len(data) + 1):where % (len(data) + 1)] = extra
        return bytes(data[:cut % (len(data) + 1)] if cut is not None else data)
    return st.tuples(st.sampled_from(seeds), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                                      max_size=8),
                     st.none() | st.integers(0, 1 << 20),
                     st.none() | st.tuples(st.integers(0, 1 << 20), st.binary(max_size=16))).map(damage)


# ------------------------------------------------------------------------------------------ checkpoint files
def _torch_bytes(value, legacy: bool = False) -> bytes:
    buffer = tempfile.SpooledTemporaryFile()
    torch.save(value, buffer, _use_new_zipfile_serialization=not legacy)
    buffer.seek(0)
    return buffer.read()


STATE = {'w': torch.arange(6.0).reshape(3, 2), 'b': torch.zeros(2), 'meta': {'iter': 3}}
CHECKPOINT_SEEDS = [_torch_bytes(STATE), _torch_bytes(STATE, legacy=True),
                    _torch_bytes({'state_dict': STATE, 'optimizer': {'lr': 0.1}}),
                    _torch_bytes({'w': torch.zeros(2), 'x': RunsCode()}),
                    _torch_bytes({'w': torch.zeros(2), 'x': RunsCode()}, legacy=True),
                    pickle.dumps({'x': RunsCode()}, protocol=2), pickle.dumps({'x': RunsCode()}, protocol=4),
                    safetensors_bytes({'w': torch.zeros(3)})]


@settings(max_examples=EXAMPLES['checkpoint files'], **FUZZ)
@given(data=st.binary(max_size=512) | damaged(CHECKPOINT_SEEDS),
       suffix=st.sampled_from(['.pth', '.bin', '.pt', '.safetensors']))
def _checkpoint_reader(workdir, data, suffix):
    state = read_or_refused('checkpoint files', read_state_dict, workdir / f'weights{suffix}', data, CheckpointError)
    assert state is None or all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())
    assert not MARKER.exists()


# ------------------------------------------------------------------------------------------ safetensors headers
json_scalars = st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats() | st.text(max_size=12)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=8)
tensor_entries = st.fixed_dictionaries({
    'dtype': st.sampled_from(['F32', 'F16', 'BF16', 'F64', 'I64', 'I8', 'U8', 'BOOL', 'F8_E4M3', 'X', '']),
    'shape': st.lists(st.integers(-2, 1 << 40), max_size=4),
    'data_offsets': st.lists(st.integers(-1, 1 << 40), max_size=3) | st.tuples(st.integers(0, 64),
                                                                               st.integers(0, 64)).map(list)})


def _crafted(args) -> bytes:
    header, body, length = args
    text = json.dumps(header).encode()
    return struct.pack('<Q', len(text) if length is None else length) + text + body


SAFETENSORS_SEEDS = [safetensors_bytes({'w': torch.arange(6.0).reshape(2, 3), 'b': torch.zeros(2, dtype=torch.int64)}),
                     safetensors_bytes({'w': torch.ones(4)}, metadata={'format': 'pt'})]
safetensors_files = st.tuples(st.dictionaries(st.text(max_size=6) | st.just('__metadata__'),
                                              tensor_entries | json_values, max_size=4),
                              st.binary(max_size=128), st.none() | st.integers(0, (1 << 64) - 1)).map(_crafted) \
    | damaged(SAFETENSORS_SEEDS) \
    | st.dictionaries(st.text(min_size=1, max_size=6), st.integers(0, 8), min_size=1, max_size=3).map(
        lambda sizes: safetensors_bytes({name: torch.zeros(n) for name, n in sizes.items()}))


@settings(max_examples=EXAMPLES['safetensors headers'], **FUZZ)
@given(data=safetensors_files)
def _safetensors_header_reader(workdir, data):
    state = read_or_refused('safetensors headers', read_state_dict, workdir / 'weights.safetensors', data,
                            CheckpointError)
    assert state is None or all(isinstance(v, torch.Tensor) for v in state.values())


# ------------------------------------------------------------------------------------------ HF config.json
PAYLOAD = f"__import__('pathlib').Path({str(MARKER)!r}).touch()"
HOSTILE = [f"a': {PAYLOAD}, 'b", f"project'); {PAYLOAD} #", f'" + {PAYLOAD} + "', f"{{{PAYLOAD}}}"]
BASE_CONFIG = dict(model_type='dpt', architectures=['DPTForSemanticSegmentation'], hidden_size=64,
                   num_hidden_layers=4, num_attention_heads=4, intermediate_size=128, image_size=64, patch_size=16,
                   backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32,
                   readout_type='project', id2label={'0': 'a', '1': 'b'}, reassemble_factors=[4, 2, 1, 0.5])
FIELDS = [*BASE_CONFIG, 'qkv_bias', 'layer_norm_eps', 'use_batch_norm_in_fusion_residual',
          'use_bias_in_fusion_residual', 'num_labels', 'semantic_classifier_dropout', 'use_auxiliary_head',
          'auxiliary_loss_weight', 'add_projection', 'hidden_act', 'is_hybrid', 'backbone_config', *HOSTILE]
hostile_values = json_values | st.sampled_from(HOSTILE) | st.dictionaries(st.sampled_from(HOSTILE), json_scalars,
                                                                          min_size=1, max_size=2)


def _config(changes):
    config = json.loads(json.dumps(BASE_CONFIG))
    for field, value, remove in changes:
        if remove:
            config.pop(field, None)
        else:
            config[field] = value
    return json.dumps(config).encode()


config_files = st.lists(st.tuples(st.sampled_from(FIELDS), hostile_values, st.booleans()), max_size=4).map(_config) \
    | damaged([_config([])]) | st.binary(max_size=64)


@settings(max_examples=EXAMPLES['HF config.json'], **FUZZ)
@given(data=config_files)
def _hf_config_reader(workdir, data):
    model = read_or_refused('HF config.json', lambda p: model_config_from_hf(read_config_json(p), p),
                            workdir / 'config.json', data, HFConfigError)
    if model is not None:  # written and read back the way tools/convert_weights.py and heads.Predictor do
        written = workdir / 'model_config.py'
        Config(dict(model=model)).dump(str(written))
        assert Config.fromfile(str(written)).model.type == model['type']
    assert not MARKER.exists()


# ------------------------------------------------------------------------------------------ images, label maps
def _encoded(suffix: str, image: np.ndarray, **pil) -> bytes:
    if pil:
        buffer = tempfile.SpooledTemporaryFile()
        Image.fromarray(image).save(buffer, format='JPEG', **pil)
        buffer.seek(0)
        return buffer.read()
    return cv2.imencode(suffix, image)[1].tobytes()


_rng = np.random.default_rng(0)
_pixels = _rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
IMAGE_SEEDS = [_encoded('.png', _pixels), _encoded('.jpg', _pixels), _encoded('.jpg', _pixels, progressive=True),
               _encoded('.bmp', _pixels), _encoded('.png', _rng.integers(0, 5, (24, 32), dtype=np.uint8)),
               _encoded('.png', _rng.integers(0, 300, (24, 32), dtype=np.uint16))]


@settings(max_examples=EXAMPLES['images and label maps'], **FUZZ)
@given(data=st.binary(max_size=256) | damaged(IMAGE_SEEDS), suffix=st.sampled_from(['.png', '.jpg', '.bmp']))
def _image_and_label_map_readers(workdir, data, suffix):
    path = workdir / f'frame{suffix}'
    image = read_or_refused('images and label maps', read_rgb, path, data, ImageError)
    assert image is None or (image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3)
    try:
        labels = TRANSFORMS.build(dict(type='LoadAnnotations'))({'seg_map_path': str(path), 'num_classes': 4})
    except ImageError as err:
        assert str(path) in str(err)
    else:
        assert labels['gt_seg_map'].dtype == np.uint8 and labels['gt_seg_map'].ndim == 2


# ------------------------------------------------------------------------------------------ feature-store index
SHARDS = ['shard_00000.safetensors', '../shard_00000.safetensors', '/etc/passwd', 'x/../shard_00000.safetensors',
          'missing.safetensors', '', '.hidden.safetensors', 'C:\\shard.safetensors']


def _edit(index: dict, target: str, value, position: int):
    if target == 'whole':
        return value
    if not isinstance(index, dict):
        return index
    images, levels = index.get('images'), index.get('levels')
    if target in ('images', 'levels', 'format', 'backbone'):
        index[target] = value
    elif target.startswith('image.') and isinstance(images, list) and images:
        record = images[position % len(images)]
        if isinstance(record, dict):
            record[target.split('.', 1)[1]] = value
    elif target.startswith('level.') and isinstance(levels, list) and levels:
        level = levels[position % len(levels)]
        if isinstance(level, dict):
            level[target.split('.', 1)[1]] = value
    elif target == 'drop' and isinstance(images, list) and images:
        images.pop(position % len(images))
    return index


index_edits = st.lists(st.tuples(
    st.sampled_from(['whole', 'images', 'levels', 'format', 'backbone', 'image.id', 'image.shard', 'image.height',
                     'level.name', 'level.stride', 'level.channels', 'drop']),
    json_values | st.sampled_from(SHARDS), st.integers(0, 8)), max_size=3)


@settings(max_examples=EXAMPLES['feature-store index'], **FUZZ)
@given(edits=index_edits, raw=st.none() | st.binary(max_size=64))
def _feature_store_index_reader(exported, workdir, edits, raw):  # noqa: F811  (the imported fixture)
    tried('feature-store index')
    folder = workdir / 'store'
    if not folder.is_dir():
        shutil.copytree(exported, folder)
    index = json.loads((exported / 'index.json').read_text())
    for target, value, position in edits:
        index = _edit(index, target, value, position)
    (folder / 'index.json').write_bytes(raw if raw is not None else json.dumps(index).encode())
    try:
        store = FeatureStore(folder)
    except FeatureStoreError as err:
        assert str(folder / 'index.json') in str(err)
        outcome('feature-store index', refused=True)
        return
    outcome('feature-store index', refused=False)
    for image_id in store.image_ids[:2]:
        shard = store.info(image_id)['shard']
        assert '/' not in shard and '\\' not in shard and not shard.startswith('.')
        try:
            maps = store[image_id]
        except (FeatureStoreError, FileNotFoundError) as err:
            assert shard in str(err)
        else:
            assert all(isinstance(m, torch.Tensor) for m in maps.values())


def fuzz(reader: str, function, **fixtures) -> None:
    """Run one reader's fuzz and check that it was given its inputs (hypothesis stops early only when a strategy
    runs out of distinct inputs, which none of these does)."""
    before = COUNTS[reader]
    function(**fixtures)
    assert COUNTS[reader] - before >= 0.9 * EXAMPLES[reader], (reader, COUNTS[reader] - before)


@pytest.mark.slow
def test_checkpoint_reader(workdir):
    fuzz('checkpoint files', _checkpoint_reader, workdir=workdir)


@pytest.mark.slow
def test_safetensors_header_reader(workdir):
    fuzz('safetensors headers', _safetensors_header_reader, workdir=workdir)


@pytest.mark.slow
def test_hf_config_reader_never_lets_code_into_the_written_config(workdir):
    fuzz('HF config.json', _hf_config_reader, workdir=workdir)


@pytest.mark.slow
def test_image_and_label_map_readers(workdir):
    fuzz('images and label maps', _image_and_label_map_readers, workdir=workdir)


@pytest.mark.slow
def test_feature_store_index_reader(exported, workdir):  # noqa: F811  (exported: the imported fixture)
    fuzz('feature-store index', _feature_store_index_reader, exported=exported, workdir=workdir)
