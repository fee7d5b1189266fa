"""Issue 20, untrusted input: a crafted Hugging Face config.json, truncated JPEGs, bad tensors given to any
backbone family, and a feature-store index that points outside its folder or is malformed."""
import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

import heads
import zoo
from heads.features import FeatureStore, FeatureStoreError, export_features, folder_images
from heads.hf.config import HFConfigError
from heads.io.images import ImageError, read_rgb
from heads.registry import TRANSFORMS
from zoo.backbones.inputs import ImageInputError

from ..layouts.test_dpt_hf_parity import save_hf

ROOT = Path(__file__).resolve().parents[2]
import convert_weights  # noqa: E402


# ------------------------------------------------------------------------------------------ 1: HF config.json
def payload(marker: Path) -> str:
    """Python that creates ``marker`` if a config file ever runs it."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def crafted(marker: Path) -> dict:
    """config.json fields whose values would become Python source in the converted config.py: a dict key that
    closes its quotes (mmengine's dump writes keys unescaped), strings that do the same."""
    key = f"a': {payload(marker)}, 'b"
    return {'qkv_bias': {key: 1},
            'readout_type': f"project'; {payload(marker)}; '",
            'layer_norm_eps': {key: 1e-12},
            'neck_hidden_sizes': [16, 32, 64, f"64 + {payload(marker)}"]}


@pytest.mark.parametrize('field', ['qkv_bias', 'readout_type', 'layer_norm_eps', 'neck_hidden_sizes'])
def test_hf_config_values_of_the_wrong_type_never_become_code(tmp_path, field):
    marker = tmp_path / 'code_ran'
    save_hf('DPTForSemanticSegmentation', tmp_path / 'hf')
    config = json.loads((tmp_path / 'hf' / 'config.json').read_text())
    config[field] = crafted(marker)[field]
    (tmp_path / 'hf' / 'config.json').write_text(json.dumps(config))
    with pytest.raises(HFConfigError, match=rf"hf/config\.json: field '{field}' must be "):
        convert_weights.main(['hf-dpt', str(tmp_path / 'hf'), str(tmp_path / 'ours')])
    assert not (tmp_path / 'ours' / 'config.py').exists()
    assert not marker.exists()


def test_hf_fields_the_converter_does_not_use_stay_out_of_the_written_config(tmp_path):
    """Label names and unknown fields may hold anything: they never reach config.py, which loads without running
    anything but the model config."""
    marker = tmp_path / 'code_ran'
    save_hf('DPTForSemanticSegmentation', tmp_path / 'hf')
    config = json.loads((tmp_path / 'hf' / 'config.json').read_text())
    config['id2label'] = {str(i): f"x'); {payload(marker)} #" for i in range(5)}
    config[f"x': {payload(marker)}, 'y"] = 1
    (tmp_path / 'hf' / 'config.json').write_text(json.dumps(config))
    convert_weights.main(['hf-dpt', str(tmp_path / 'hf'), str(tmp_path / 'ours')])
    text = (tmp_path / 'ours' / 'config.py').read_text()
    assert '__import__' not in text
    predictor = heads.Predictor(tmp_path / 'ours' / 'config.py', tmp_path / 'ours' / 'model.safetensors')
    assert predictor(np.zeros((32, 48, 3), np.uint8)).shape == (32, 48)
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ 4: truncated JPEGs
def jpeg(path: Path, progressive: bool = False) -> Path:
    pixels = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, quality=90, progressive=progressive)
    return path


@pytest.mark.parametrize('progressive', [False, True])
def test_a_truncated_jpeg_is_an_error_naming_the_file_not_grey_rows(tmp_path, progressive):
    whole = jpeg(tmp_path / 'whole.jpg', progressive)
    data = whole.read_bytes()
    cut = tmp_path / 'frame_0042.jpg'
    cut.write_bytes(data[:int(len(data) * 0.7)])
    assert cv2.imread(str(cut)) is not None  # what libjpeg alone does: a picture, the missing rows grey
    with pytest.raises(ImageError, match=r'frame_0042\.jpg: the file is corrupt or truncated'):
        read_rgb(cut)
    with pytest.raises(ImageError, match=r'frame_0042\.jpg'):  # the training pipeline's first step
        TRANSFORMS.build(dict(type='LoadImage'))({'img_path': str(cut)})
    with pytest.raises(ImageError, match=r'label map .*frame_0042\.jpg'):
        TRANSFORMS.build(dict(type='LoadAnnotations'))({'seg_map_path': str(cut)})
    (tmp_path / 'tail.jpg').write_bytes(data + b'camera maker notes after the end marker')
    assert read_rgb(tmp_path / 'tail.jpg').shape == (48, 64, 3) == read_rgb(whole).shape  # no false alarm


def test_an_image_header_declaring_a_huge_size_is_refused_before_decoding(tmp_path):
    cv2.imwrite(str(tmp_path / 'small.bmp'), np.zeros((4, 4, 3), np.uint8))
    data = bytearray((tmp_path / 'small.bmp').read_bytes())
    data[18:26] = (20000).to_bytes(4, 'little') * 2  # width and height fields of the BMP header
    (tmp_path / 'bomb.bmp').write_bytes(bytes(data))
    with pytest.raises(ImageError, match=r'bomb\.bmp declares 20000x20000 pixels, more than the 268435456'):
        read_rgb(tmp_path / 'bomb.bmp')


# ------------------------------------------------------------------------------------------ 12: backbone inputs
FAMILIES = {'vit_tiny_patch16_224': dict(depth=1), 'cvt_13_224': dict(depths=(1, 1, 1)),
            'coatnet_0_rw_224': dict(depths=(1, 1, 1, 1)), 'crossvit_tiny_240': dict(depths=((1, 1, 0),) * 3),
            'swin_tiny_patch4_window7_224': dict(depths=(1, 1, 1, 1))}
BAD = {
    'float64': (torch.zeros(1, 3, 64, 64, dtype=torch.float64), r'has torch\.float32 weights but the images are '
                                                                 r'torch\.float64'),
    'uint8': (torch.zeros(1, 3, 64, 64, dtype=torch.uint8), r'takes floating-point images, got torch\.uint8'),
    '3-D': (torch.zeros(3, 64, 64), r'got \(3, 64, 64\); a single image\? add the batch dimension'),
    '5-D': (torch.zeros(1, 2, 3, 64, 64), r'got \(1, 2, 3, 64, 64\); a batch of clips'),
    '1 channel': (torch.zeros(1, 1, 64, 64), r'expected images of shape \(B, 3, H, W\), got \(1, 1, 64, 64\)'),
    '1x1': (torch.zeros(1, 3, 1, 1), r'input size 1x1 is below the smallest side \d+'),
    'numpy': (np.zeros((1, 3, 64, 64), np.float32), r'takes a torch\.Tensor of images'),
}


@pytest.fixture(scope='module')
def backbones():
    return {name: zoo.create_backbone(name, **kwargs).eval() for name, kwargs in FAMILIES.items()}


@pytest.mark.parametrize('name', FAMILIES)
@pytest.mark.parametrize('case', BAD)
def test_every_family_explains_a_bad_input_the_same_way(backbones, name, case):
    x, message = BAD[case]
    model = backbones[name]
    with torch.no_grad():
        with pytest.raises(ImageInputError, match=message):
            model(x)
        with pytest.raises(ImageInputError, match=message):  # what DPT necks call (the contract): checked too
            model.forward_taps(x)
        if case == 'numpy':  # once per family: a good batch still passes
            assert len(model(torch.zeros(1, 3, 64, 64))) == len(model.out_indices)


# ------------------------------------------------------------------------------------------ 13: FeatureStore
@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """A real two-image export of a one-block ViT."""
    root = tmp_path_factory.mktemp('export')
    (root / 'images').mkdir()
    for i in range(2):
        cv2.imwrite(str(root / 'images' / f'{i}.png'), np.full((40, 56, 3), 60 * i, np.uint8))
    model = zoo.create_backbone('vit_tiny_patch16_224', depth=1).eval()
    export_features(model, folder_images(root / 'images'), root / 'features', short_side=32, progress=False)
    return root / 'features'


def edited(exported: Path, to: Path, change) -> Path:
    to.mkdir()
    for path in exported.iterdir():
        (to / path.name).write_bytes(path.read_bytes())
    index = json.loads((to / 'index.json').read_text())
    change(index)
    (to / 'index.json').write_text(json.dumps(index))
    return to


@pytest.mark.parametrize('shard', ['../outside.safetensors', '/tmp/outside.safetensors', 'sub/x.safetensors',
                                   '..\\outside.safetensors', 'index.json'])
def test_an_index_cannot_point_at_files_outside_its_folder(exported, tmp_path, shard):
    store = FeatureStore(exported)
    outside = tmp_path / 'outside.safetensors'  # a valid shard, so an unchecked reader would return its tensors
    outside.write_bytes((exported / store.info(store.image_ids[0])['shard']).read_bytes())
    folder = edited(exported, tmp_path / 'store', lambda index: index['images'][0].update(shard=shard))
    with pytest.raises(FeatureStoreError, match=r"store/index\.json: images\[0\]: shard " + re.escape(repr(shard))):
        FeatureStore(folder)


@pytest.mark.parametrize('change, where', [
    (lambda index: index['images'].__setitem__(0, ['not', 'a', 'record']), r"images\[0\] must be an object"),
    (lambda index: index.pop('levels'), r"'levels' must be a non-empty list"),
    (lambda index: index['levels'][0].update(stride='16'), r"levels\[0\] must be an object"),
    (lambda index: index['images'][1].update(id=index['images'][0]['id']), r"images\[1\]\.id .* must be unique"),
    (lambda index: index.update(images={'0': 1}), r"'images' must be a list"),
])
def test_a_malformed_index_names_the_file_and_the_entry(exported, tmp_path, change, where):
    folder = edited(exported, tmp_path / 'store', change)
    with pytest.raises(FeatureStoreError, match=rf"store/index\.json: {where}"):
        FeatureStore(folder)
    (folder / 'index.json').write_text('{"images": [')
    with pytest.raises(FeatureStoreError, match=r'store/index\.json is not valid JSON'):
        FeatureStore(folder)
