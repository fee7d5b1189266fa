"""tools/export_features.py and heads.features on real CamVid images: stored maps equal the in-memory forward,
an interrupted export resumes without recomputing finished shards, COCO and folder inputs, the index, errors."""
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import zoo
from heads.detection import PyramidBackbone
from heads.features import ExportSettingsError, FeatureStore, input_size, preprocess, weights_hash
from heads.features import writer as writer_module
from heads.io.images import read_rgb

from ..reference import perturb_, shared_data

ROOT = Path(__file__).resolve().parents[2]
import export_features as tool  # noqa: E402

BUILD_MODEL = tool.build_model

VIT = ['--backbone', 'vit_tiny_patch16_224', '--backbone-kwargs', '{"depth": 2}', '--short-side', '64']
COCO_IDS = [101, 102, 103, 104, 105]


@pytest.fixture(scope='module')
def camvid_val():
    return shared_data('camvid', 'images', 'val')


@pytest.fixture
def coco_file(tmp_path, camvid_val):
    """A COCO JSON listing five CamVid val images with ids 101..105 (in reverse order: the export sorts by id)."""
    names = sorted(p.name for p in camvid_val.glob('*.jpg'))[:len(COCO_IDS)]
    images = [dict(id=i, file_name=n, height=360, width=480) for i, n in zip(COCO_IDS, names)][::-1]
    path = tmp_path / 'coco.json'
    path.write_text(json.dumps(dict(images=images, annotations=[], categories=[dict(id=1, name='car')])))
    return path


def vit(**kwargs):
    torch.manual_seed(tool.SEED)  # as the tool builds it without --pretrained
    return zoo.create_backbone('vit_tiny_patch16_224', depth=2, **kwargs).eval()


def reference_maps(model, path, store: FeatureStore, image_id) -> list[torch.Tensor]:
    """The model's maps of the image as the export preprocesses it (size from the index, mean/std of the model)."""
    info = store.info(image_id)
    x = preprocess(read_rgb(path), (info['input_height'], info['input_width']), model.pretrained_cfg['mean'],
                   model.pretrained_cfg['std'])
    with torch.no_grad():
        return [m[0] for m in model(x)]


def counting_model(monkeypatch, raise_at=None) -> list:
    """Count the forward calls of the model the tool builds; raise (a simulated kill) at call ``raise_at``."""
    calls, build = [], BUILD_MODEL

    def hooked(args):
        model = build(args)

        def hook(module, inputs, output):
            calls.append(1)
            if raise_at is not None and len(calls) >= raise_at:
                raise RuntimeError('simulated kill')
        model.register_forward_hook(hook)
        return model
    monkeypatch.setattr(tool, 'build_model', hooked)
    return calls


def test_coco_export_equals_forward_and_index(tmp_path, coco_file, camvid_val):
    out = tmp_path / 'feats'
    summary = tool.main([*VIT, '--coco', str(coco_file), '--images', str(camvid_val), '--out', str(out),
                         '--images-per-shard', '2'])
    assert (summary.written, summary.skipped, summary.shards_written, summary.shards) == (5, 0, 3, 3)
    assert sorted(p.name for p in out.iterdir()) == ['index.json', 'shard_00000.safetensors',
                                                     'shard_00001.safetensors', 'shard_00002.safetensors']
    model = vit()
    index = json.loads((out / 'index.json').read_text())
    assert index['backbone'] == 'vit_tiny_patch16_224' and index['weights_hash'] == weights_hash(model)
    assert index['levels'] == [dict(name='out0', stride=16, channels=192), dict(name='out1', stride=16, channels=192)]
    assert index['settings']['resize']['short_side'] == 64 and index['settings']['resize']['multiple'] == 16
    assert index['settings']['normalize']['mean'] == [0.5, 0.5, 0.5] and index['settings']['dtype'] == 'float32'
    assert [r['id'] for r in index['images']] == COCO_IDS  # sorted by id
    assert [r['shard'] for r in index['images']] == ['shard_00000.safetensors'] * 2 + \
        ['shard_00001.safetensors'] * 2 + ['shard_00002.safetensors']
    # 480x360: short side 360 -> 64, long side 85.3 -> 80 (nearest multiple of 16)
    assert {(r['height'], r['width'], r['input_height'], r['input_width']) for r in index['images']} == \
        {(360, 480, 64, 80)}

    store = FeatureStore(out)
    assert store.image_ids == COCO_IDS and len(store) == 5 and 103 in store and '103' in store
    assert store.meta['weights_hash'] == weights_hash(model) and store.levels == index['levels']
    for record in index['images']:
        maps = store[record['id']]
        assert list(maps) == ['out0', 'out1']
        for got, want in zip(maps.values(), reference_maps(model, camvid_val / record['file_name'], store,
                                                            record['id'])):
            assert got.dtype == torch.float32 and got.shape == (192, 4, 5) and torch.equal(got, want)
    assert list(store.get('104', levels=['out1'])) == ['out1']  # the id as a string; one level only


def test_folder_export_pyramid_float16(tmp_path, camvid_val):
    out = tmp_path / 'feats'
    kwargs = ['--backbone', 'cvt_13_224', '--backbone-kwargs', '{"depths": [1, 1, 1]}', '--pyramid',
              '--pyramid-channels', '16', '--dtype', 'float16', '--short-side', '64']
    summary = tool.main([*kwargs, '--folder', str(camvid_val), '--out', str(out), '--limit', '3'])
    assert (summary.written, summary.shards) == (3, 1)  # default 64 images per shard
    store = FeatureStore(out)
    names = sorted(p.name for p in camvid_val.glob('*.jpg'))[:3]
    assert store.image_ids == names  # folder input: ids are the relative paths
    assert store.levels == [dict(name=f'p{k}', stride=2 ** k, channels=16) for k in (2, 3, 4, 5)]
    assert store.meta['settings']['model'] == dict(backbone='cvt_13_224', backbone_kwargs=dict(depths=[1, 1, 1]),
                                                   pyramid=True, pyramid_channels=16)
    torch.manual_seed(tool.SEED)
    model = PyramidBackbone('cvt_13_224', out_channels=16, depths=(1, 1, 1)).eval()
    assert store.meta['weights_hash'] == weights_hash(model)
    info = store.info(names[0])
    assert (info['input_height'], info['input_width']) == input_size(360, 480, 64, 32) == (64, 96)
    for got, want in zip(store[names[0]].values(), reference_maps(model, camvid_val / names[0], store, names[0])):
        assert got.dtype == torch.float16 and torch.equal(got, want.half())


def test_interrupted_export_resumes_without_recomputing(tmp_path, camvid_val, monkeypatch):
    out = tmp_path / 'feats'
    argv = [*VIT, '--folder', str(camvid_val), '--out', str(out), '--limit', '7', '--images-per-shard', '2']
    names = sorted(p.name for p in camvid_val.glob('*.jpg'))[:7]

    # 1. killed while writing shard 1: shard 0 is finished, shard 1 a truncated .partial
    real_save, saves = writer_module.save_file, []

    def killed_save(tensors, filename, metadata=None):
        saves.append(filename)
        real_save(tensors, filename, metadata=metadata)
        if len(saves) == 2:
            Path(filename).write_bytes(Path(filename).read_bytes()[:100])
            raise RuntimeError('simulated kill')
    with monkeypatch.context() as patch:
        patch.setattr(writer_module, 'save_file', killed_save)
        with pytest.raises(RuntimeError, match='simulated kill'):
            tool.main(argv)
    assert sorted(p.name for p in out.iterdir()) == ['index.json', 'shard_00000.safetensors',
                                                     'shard_00001.safetensors.partial']
    assert FeatureStore(out).image_ids == names[:2]
    first = (out / 'shard_00000.safetensors').stat()

    # 2. killed in the model at the third image it computes: shard 1 (2 images) is finished, shard 2 is not
    calls = counting_model(monkeypatch, raise_at=3)
    with pytest.raises(RuntimeError, match='simulated kill'):
        tool.main(argv)
    assert len(calls) == 3  # shard 0 was not computed again
    assert sorted(p.name for p in out.iterdir()) == ['index.json', 'shard_00000.safetensors',
                                                     'shard_00001.safetensors']  # the stale .partial is gone
    assert FeatureStore(out).image_ids == names[:4]
    second = (out / 'shard_00001.safetensors').stat()

    # 3. the rerun computes only the 3 images of shards 2 and 3; finished shards are not rewritten
    calls = counting_model(monkeypatch)
    summary = tool.main(argv)
    assert len(calls) == 3 and (summary.written, summary.skipped, summary.shards_written, summary.shards) == \
        (3, 4, 2, 4)
    for name, before in [('shard_00000.safetensors', first), ('shard_00001.safetensors', second)]:
        after = (out / name).stat()
        assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns,
                                                                    before.st_size)
    store = FeatureStore(out)
    assert store.image_ids == names
    model = vit()
    for name in (names[0], names[6]):
        for got, want in zip(store[name].values(), reference_maps(model, camvid_val / name, store, name)):
            assert torch.equal(got, want)

    # 4. everything done: nothing is computed; a larger --limit computes only the new shard
    calls = counting_model(monkeypatch)
    summary = tool.main(argv)
    assert len(calls) == 0 and (summary.written, summary.skipped) == (0, 7)
    summary = tool.main([*argv[:-4], '--limit', '8', '--images-per-shard', '2'])
    assert len(calls) == 2 and (summary.written, summary.skipped, summary.shards) == (2, 6, 4)
    assert FeatureStore(out).image_ids == sorted(p.name for p in camvid_val.glob('*.jpg'))[:8]


def test_changed_weights_settings_or_images_are_refused(tmp_path, coco_file, camvid_val):
    first, second = tmp_path / 'a.safetensors', tmp_path / 'b.safetensors'
    save_file(dict(vit().state_dict()), str(first))
    changed = perturb_(vit())
    save_file(dict(changed.state_dict()), str(second))
    out = tmp_path / 'feats'
    argv = [*VIT, '--coco', str(coco_file), '--images', str(camvid_val), '--out', str(out), '--limit', '2']
    tool.main([*argv, '--pretrained', str(first)])
    with pytest.raises(ExportSettingsError, match=r'(?s)other settings or weights.*weights_hash.*--overwrite'):
        tool.main([*argv, '--pretrained', str(second)])
    with pytest.raises(ExportSettingsError, match=r'(?s)settings.resize.short_side: 64 there, 96 now'):
        tool.main([*argv, '--pretrained', str(first), '--short-side', '96'])
    with pytest.raises(ExportSettingsError, match='other images.*--overwrite'):
        tool.main([*VIT, '--folder', str(camvid_val), '--out', str(out), '--limit', '2', '--pretrained', str(first)])
    summary = tool.main([*argv, '--pretrained', str(second), '--overwrite'])
    assert summary.written == 2 and FeatureStore(out).meta['weights_hash'] == weights_hash(changed)


def test_unknown_image_id_and_missing_index(tmp_path, coco_file, camvid_val):
    out = tmp_path / 'feats'
    tool.main([*VIT, '--coco', str(coco_file), '--images', str(camvid_val), '--out', str(out), '--limit', '3'])
    store = FeatureStore(out)
    with pytest.raises(KeyError, match=r"image id 999 is not in the feature store .*\(3 image ids: 101, 102, 103\)"):
        store[999]
    with pytest.raises(KeyError, match='999'):
        store.get(999)
    with pytest.raises(KeyError, match=r"levels \['p2'\]"):
        store.get(101, levels=['p2'])
    with pytest.raises(FileNotFoundError, match='not a feature export'):
        FeatureStore(tmp_path)


def test_weights_hash_covers_values_dtype_and_names():
    model = torch.nn.Linear(3, 2)
    digest = weights_hash(model)
    assert digest.startswith('sha256:') and weights_hash(model) == digest
    assert weights_hash(torch.nn.Linear(3, 2)) != digest
    with torch.no_grad():
        model.bias[0] += 1
    assert weights_hash(model) != digest
    assert weights_hash(model.double()) != weights_hash(model.float())
    assert weights_hash(torch.nn.Sequential(model)) != weights_hash(model)  # keys 0.weight vs weight
