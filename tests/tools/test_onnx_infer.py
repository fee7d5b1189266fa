"""tools/infer.py on an exported ONNX file: the same pictures and raw predictions as on the checkpoint it was
exported from (segmentation and metric depth, whole image and --tile; a mask-classification model's semantic,
instance and panoptic results from its class and mask logits), preprocessing and class names read from the file's
metadata; a file without that metadata is refused."""
import json

import cv2
import infer
import numpy as np
import pytest
import torch

import heads
from heads.export.metadata import KEY, config_metadata, read_metadata, task_metadata, write_metadata

from ..reference import shared_data, tiny_dpt
from .onnx_files import mask_onnx, plain_onnx

pytest.importorskip('onnxruntime')
onnx = pytest.importorskip('onnx')

CAMVID_TEST = dict(type='CamVidDataset', data_root='unused', split='val', pipeline=[])  # names only (lazy)


def test_a_file_without_task_metadata_is_refused(tmp_path):
    path = plain_onnx(tmp_path / 'bare.onnx')
    with pytest.raises(ValueError, match=r"bare.onnx carries no task metadata .*tools/export_model.py --config"):
        infer.main([str(path), str(tmp_path), '--out', str(tmp_path / 'out')])
    with pytest.raises(FileNotFoundError, match='missing.onnx does not exist'):
        read_metadata(tmp_path / 'missing.onnx')


def test_each_kind_of_file_opens_as_its_own_model_and_only_as_it(tmp_path):
    from mmengine.config import Config

    from heads.export import OnnxMaskModel, OnnxTaskModel, load_onnx_model
    cfg = Config.fromfile('configs/eomt_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=2)
    cfg.update(num_queries=4, num_blocks=1)
    meta = task_metadata(heads.MODELS.build(cfg))
    assert meta['task'] == 'MaskClassifier' and meta['model'] == 'EoMT' and meta['input_multiple'] == 16
    assert meta['outputs'] == ['class_logits', 'mask_logits'] and meta['num_classes'] == 11
    mask_file = mask_onnx(tmp_path / 'eomt.onnx', queries=4, num_classes=11)
    write_metadata(mask_file, meta)
    dense_file = plain_onnx(tmp_path / 'dpt.onnx')
    write_metadata(dense_file, task_metadata(heads.MODELS.build(tiny_dpt('seg'))))
    assert type(load_onnx_model(mask_file)) is OnnxMaskModel and type(load_onnx_model(dense_file)) is OnnxTaskModel
    with pytest.raises(ValueError, match=r"eomt.onnx: this EoMT export gives class logits .*OnnxMaskModel"):
        OnnxTaskModel(mask_file)
    with pytest.raises(ValueError, match=r"dpt.onnx: task 'Segmentor' is not a mask-classification model's"):
        OnnxMaskModel(dense_file)
    with pytest.raises(ValueError, match=r"test_cfg mode must be 'whole' or 'slide', got 'tile'"):
        infer.main([str(mask_file), str(tmp_path), '--out', str(tmp_path / 'out'), '--tile', '64', '64'])


def test_metadata_holds_the_models_preprocessing_and_the_configs_classes(tmp_path):
    from mmengine.config import Config
    model = heads.MODELS.build(tiny_dpt('metric', data_preprocessor=dict(type='DensePreprocessor', size_divisor=16,
                                                                         mean=(1, 2, 3), std=(4, 5, 6))))
    meta = task_metadata(model)
    assert meta['task'] == 'DepthEstimator' and meta['output'] == 'depth' and meta['relative'] is False
    assert meta['preprocessor'] == {'mean': [1, 2, 3], 'std': [4, 5, 6], 'size_divisor': 16, 'pad_val': 0.0,
                                    'bgr_to_rgb': False}
    assert meta['input_multiple'] == 32 and meta['test_cfg']['mode'] == 'whole'
    cfg = Config(dict(model=tiny_dpt('seg'), predict_scale=(240, 180), test_dataloader=dict(dataset=CAMVID_TEST)))
    extra = config_metadata(cfg)
    assert extra['predict_scale'] == [240, 180] and extra['classes'][:2] == ['Sky', 'Building']
    assert extra['palette'][0] == [128, 128, 128] and len(extra['classes']) == 11
    path = plain_onnx(tmp_path / 'm.onnx', output='depth', channels=1)
    write_metadata(path, {**meta, **extra})
    write_metadata(path, {**meta, **extra})  # rewritten, not duplicated
    assert [p.key for p in onnx.load(str(path)).metadata_props] == [KEY]
    assert read_metadata(path) == json.loads(json.dumps({**meta, **extra}))


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """task -> (config, checkpoint, onnx file) of a random tiny DPT, exported with tools/export_model.py."""
    from export_model import main as export
    root = tmp_path_factory.mktemp('onnx_infer')
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    made = {}
    try:
        for task in ('seg', 'metric'):
            config = root / f'{task}.py'
            test = '' if task != 'seg' else f'test_dataloader = dict(dataset={CAMVID_TEST!r})\n'
            config.write_text(f'model = {tiny_dpt(task)!r}\npredict_scale = (160, 120)\n{test}')
            torch.manual_seed(0)
            model = heads.MODELS.build(tiny_dpt(task))
            if task == 'metric':  # a random depth head predicts ~0: give it a bias into the metre range
                with torch.no_grad():
                    last = [m for m in model.decode_head.modules() if isinstance(m, torch.nn.Conv2d)][-1]
                    last.bias.fill_(0.5)
            torch.save({'state_dict': model.state_dict()}, root / f'{task}.pth')
            out = root / f'{task}.onnx'
            assert export(['--config', str(config), '--checkpoint', str(root / f'{task}.pth'), '--size', '64', '96',
                           '--out', str(out)]) == 0
            made[task] = config, root / f'{task}.pth', out
    finally:
        torch.set_num_threads(threads)
    return made


def images(tmp_path, folder, names, size):
    """Real frames resized to ``size`` (w, h), written as PNG into tmp_path / 'in'."""
    target = tmp_path / 'in'
    target.mkdir(exist_ok=True)
    for name in names:
        picture = cv2.imread(str(shared_data(*folder, name)))
        cv2.imwrite(str(target / (name.rsplit('.', 1)[0] + '.png')), cv2.resize(picture, size, cv2.INTER_AREA))
    return target


def run_both(exported, task, tmp_path, inputs, *options):
    """infer.py on the checkpoint and on the ONNX file: {stem: (checkpoint picture, raw), (onnx picture, raw)}."""
    config, checkpoint, onnx_file = exported[task]
    infer.main([str(config), str(checkpoint), str(inputs), '--out', str(tmp_path / 'pt'), *options])
    infer.main([str(onnx_file), str(inputs), '--out', str(tmp_path / 'onnx'), '--threads', '1', *options])
    read = lambda folder, name: cv2.imread(str(tmp_path / folder / name), cv2.IMREAD_UNCHANGED)  # noqa: E731
    stems = sorted(p.stem for p in inputs.iterdir())
    return {s: [(read(f, f'{s}.png'), read(f, f'{s}_pred.png')) for f in ('pt', 'onnx')] for s in stems}


@pytest.mark.slow
def test_segmentation_onnx_draws_what_the_checkpoint_draws(exported, tmp_path):
    """Two CamVid frames (240x180, resized to the config's predict_scale 160x120 and back): the class maps agree on
    at least 99.9% of the pixels (logits within ~1e-5; an argmax between near-equal logits may flip) and the
    pictures (overlay + legend of the CamVid classes present) differ by at most 1 grey level on average."""
    inputs = images(tmp_path, ('camvid', 'images', 'val'), ['0016E5_07959.jpg', '0016E5_07961.jpg'], (240, 180))
    for stem, ((pt_picture, pt_raw), (onnx_picture, onnx_raw)) in run_both(exported, 'seg', tmp_path, inputs).items():
        assert pt_raw.shape == onnx_raw.shape == (180, 240) and onnx_raw.dtype == np.uint8, stem
        assert (pt_raw == onnx_raw).mean() >= 0.999, stem
        assert pt_picture.shape == onnx_picture.shape, stem  # the same legend: the same classes present
        assert np.abs(pt_picture.astype(int) - onnx_picture).mean() <= 1.0, stem


@pytest.mark.slow
def test_depth_onnx_writes_the_checkpoints_depth_whole_and_tiled(exported, tmp_path):
    """Two 7-Scenes frames: the 16-bit millimetre maps differ by at most 1 mm (rounding of depths equal within
    ~1e-5 m), whole image (resize to 160x120) and with --tile 64 64 --overlap 32 at the image's own size."""
    inputs = images(tmp_path, ('depth-7scenes', 'rgb'), ['frame-000000.jpg', 'frame-000010.jpg'], (192, 144))
    for options in ([], ['--tile', '64', '64', '--overlap', '32']):
        for stem, ((pt_picture, pt_raw), (onnx_picture, onnx_raw)) in run_both(
                exported, 'metric', tmp_path, inputs, *options).items():
            assert pt_raw.shape == onnx_raw.shape == (144, 192) and onnx_raw.dtype == np.uint16, (stem, options)
            assert pt_raw.min() > 0, 'a depth map in the metre range, not clipped to 0'
            assert np.abs(pt_raw.astype(int) - onnx_raw).max() <= 1, (stem, options)
            assert np.abs(pt_picture.astype(int) - onnx_picture).mean() <= 1.0, (stem, options)


@pytest.mark.slow
def test_int8_files_run_through_infer_and_stay_close(exported, tmp_path):
    """The segmentation export quantized (dynamic int8 Linears; static int8 convolutions calibrated on the two
    frames, plus dynamic Linears): infer.py runs both with the fp32 file's metadata, and their class maps agree with
    the fp32 file's on most pixels (a random model's logits are close together, so int8 flips some; the trained
    models' cost is measured in docs/benchmarks/int8_cpu.md)."""
    from heads.export import OnnxTaskModel
    from heads.export.quantize import cpu_has_vnni, op_counts, quantize_dynamic, quantize_static
    inputs = images(tmp_path, ('camvid', 'images', 'val'), ['0016E5_07959.jpg', '0016E5_07961.jpg'], (240, 180))
    fp32 = exported['seg'][2]
    model = OnnxTaskModel(fp32)
    batches = []
    for path in sorted(inputs.iterdir()):
        picture = cv2.resize(cv2.imread(str(path))[:, :, ::-1], (160, 120), interpolation=cv2.INTER_LINEAR)
        data = {'inputs': [torch.from_numpy(picture.transpose(2, 0, 1).copy())], 'data_samples': None}
        batches.append(model.data_preprocessor(data, False)['inputs'].numpy())
    files = {'dynamic': quantize_dynamic(fp32, tmp_path / 'dynamic.onnx'),
             'static': quantize_static(fp32, tmp_path / 'static.onnx', batches)}
    assert op_counts(files['dynamic'])['MatMulInteger'] == 16 + 4  # 4 blocks x (qkv, proj, fc1, fc2), 4 readouts
    assert op_counts(files['static'])['QuantizeLinear'] > 0 and op_counts(files['static'])['MatMulInteger'] == 20
    infer.main([str(fp32), str(inputs), '--out', str(tmp_path / 'fp32'), '--threads', '1'])
    # 7-bit static weights where this CPU's int8 kernels sum pairs in 16 bits (no VNNI): 8 bits saturate there
    assert OnnxTaskModel(files['static']).metadata['quantization']['reduce_range'] == (not cpu_has_vnni())
    for name, path in files.items():
        assert OnnxTaskModel(path).metadata['quantization']['kind'].startswith(name)
        infer.main([str(path), str(inputs), '--out', str(tmp_path / name), '--threads', '1'])
        for image in inputs.iterdir():
            read = lambda folder: cv2.imread(str(tmp_path / folder / f'{image.stem}_pred.png'),  # noqa: E731
                                             cv2.IMREAD_UNCHANGED)
            agree = (read('fp32') == read(name)).mean()
            assert agree >= 0.9, (name, image.stem, agree)


@pytest.fixture(scope='module')
def exported_eomt(tmp_path_factory):
    """(config, checkpoint, onnx file) of a random EoMT (the CamVid CPU config's, its ViT cut to two blocks, 8
    queries), exported with tools/export_model.py."""
    from pathlib import Path

    from export_model import main as export
    root = tmp_path_factory.mktemp('onnx_infer_eomt')
    config = root / 'eomt_tiny.py'
    base = Path('configs/eomt_vitt4_camvid_cpu.py').resolve()
    config.write_text(f"_base_ = [{str(base)!r}]\nmodel = dict(backbone=dict(depth=2), num_queries=8, num_blocks=1)\n")
    from mmengine.config import Config
    torch.manual_seed(0)
    model = heads.MODELS.build(Config.fromfile(str(config)).model)
    torch.save({'state_dict': model.state_dict()}, root / 'eomt.pth')
    out = root / 'eomt.onnx'
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert export(['--config', str(config), '--checkpoint', str(root / 'eomt.pth'), '--out', str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return config, root / 'eomt.pth', out


@pytest.mark.slow
def test_a_mask_models_onnx_draws_what_its_checkpoint_draws(exported_eomt, tmp_path):
    """EoMT's semantic results through infer.py: two CamVid frames (resized to the config's predict_scale and back),
    the class maps agree on at least 99.9% of the pixels and the pictures by at most 1 grey level on average; the
    maps are not one class (the comparison is not of two constants)."""
    inputs = images(tmp_path, ('camvid', 'images', 'val'), ['0016E5_07959.jpg', '0016E5_07961.jpg'], (240, 180))
    config, checkpoint, onnx_file = exported_eomt
    infer.main([str(config), str(checkpoint), str(inputs), '--out', str(tmp_path / 'pt')])
    infer.main([str(onnx_file), str(inputs), '--out', str(tmp_path / 'onnx'), '--threads', '1'])
    for image in sorted(inputs.iterdir()):
        read = lambda folder, name: cv2.imread(str(tmp_path / folder / name), cv2.IMREAD_UNCHANGED)  # noqa: E731
        pt_raw, onnx_raw = (read(f, f'{image.stem}_pred.png') for f in ('pt', 'onnx'))
        assert pt_raw.shape == onnx_raw.shape == (180, 240) and onnx_raw.dtype == np.uint8, image.stem
        assert len(np.unique(pt_raw)) > 1, 'a random EoMT that predicts one class everywhere tests nothing here'
        assert (pt_raw == onnx_raw).mean() >= 0.999, image.stem
        pt_picture, onnx_picture = (read(f, f'{image.stem}.png') for f in ('pt', 'onnx'))
        assert pt_picture.shape == onnx_picture.shape, image.stem  # the same legend: the same classes present
        assert np.abs(pt_picture.astype(int) - onnx_picture).mean() <= 1.0, image.stem


@pytest.mark.slow
def test_a_mask_models_onnx_gives_its_instances_and_panoptic_map(exported_eomt):
    """Semantic, instance and panoptic results at once (test_cfg overriding the file's, as the checkpoint's model
    is built with it), a batch of two CamVid frames of the preprocessor's making: the same class scores (1e-4),
    instance labels, scores and masks, and the same panoptic map and segments as the PyTorch model's."""
    from mmengine.config import Config
    from mmengine.structures import BaseDataElement

    from heads.export import OnnxMaskModel
    from heads.models.task_checkpoint import load_task_checkpoint
    config, checkpoint, onnx_file = exported_eomt
    test_cfg = dict(tasks=('semantic', 'instance', 'panoptic'), top_k=5, object_threshold=0.0)
    cfg = Config.fromfile(str(config)).model
    cfg.test_cfg = test_cfg
    torch_model = heads.MODELS.build(cfg).eval()
    load_task_checkpoint(torch_model, checkpoint)
    onnx_model = OnnxMaskModel(onnx_file, threads=1, test_cfg=test_cfg)
    assert onnx_model.test_cfg == torch_model.test_cfg
    frames = [cv2.imread(str(shared_data('camvid', 'images', 'val', n)))[:, :, ::-1]
              for n in ('0016E5_07959.jpg', '0016E5_07961.jpg')]
    frames = [cv2.resize(f, (120, 90), interpolation=cv2.INTER_AREA) for f in frames]  # 90 rows: padded to 96

    def predict(model):
        samples = [BaseDataElement(metainfo={'ori_shape': f.shape[:2], 'img_shape': f.shape[:2]}) for f in frames]
        data = {'inputs': [torch.from_numpy(f.transpose(2, 0, 1).copy()) for f in frames], 'data_samples': samples}
        data = model.data_preprocessor(data, False)
        assert tuple(data['inputs'].shape[-2:]) == (96, 128)
        with torch.no_grad():
            return model(data['inputs'], data['data_samples'], mode='predict')

    for pt, ox in zip(predict(torch_model), predict(onnx_model)):
        torch.testing.assert_close(ox.seg_logits.data, pt.seg_logits.data, rtol=1e-4, atol=1e-5)
        assert ox.pred_sem_seg.data.shape == (1, 90, 120)
        assert (ox.pred_sem_seg.data == pt.pred_sem_seg.data).float().mean() >= 0.999
        assert len(pt.pred_instances) == 5
        assert torch.equal(ox.pred_instances.labels, pt.pred_instances.labels)
        torch.testing.assert_close(ox.pred_instances.scores, pt.pred_instances.scores, rtol=1e-4, atol=1e-6)
        assert (ox.pred_instances.masks == pt.pred_instances.masks).float().mean() >= 0.999
        segments, got = (x.pred_panoptic_seg.metainfo['segments_info'] for x in (pt, ox))
        without_score = lambda infos: [{k: v for k, v in i.items() if k != 'score'} for i in infos]  # noqa: E731
        assert segments and without_score(got) == without_score(segments)
        assert [i['score'] for i in got] == pytest.approx([i['score'] for i in segments], rel=1e-4)
        assert (ox.pred_panoptic_seg.data == pt.pred_panoptic_seg.data).float().mean() >= 0.999


def test_export_model_s_help_says_infer_runs_a_mask_models_file():
    """tools/export_model.py's help said infer.py refuses a mask model's ONNX file; it runs them (the two tests
    above), and the help says so."""
    import export_model
    text = ' '.join(export_model.__doc__.split())
    assert 'refuses a mask' not in text
    assert 'mask models too: their semantic, instance and panoptic post-processing runs on the file' in text
