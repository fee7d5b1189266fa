"""Issue 36.2: every config in configs/ (configs/evidence/ too; not the ``_base_`` fragments) round-trips its own
checkpoint. Its model, made small where the config's sizes are too slow for a test (fewer blocks, narrower necks,
64-pixel images; the same backbone family and head types), trains one iteration with tools/train.py on a tiny
dataset of its kind; the checkpoint the runner writes then loads back through ``load_task_checkpoint`` (this
project's layout, exactly the trained tensors), evaluates through tools/test.py with the metrics of the trained
model, predicts through ``heads.Predictor`` what the trained model predicts, and ``--resume`` continues it for
one iteration. Where a path does not apply to a kind of model, ``NOT_APPLICABLE`` says why. The time taken per
config is printed at the end of the module."""
import json
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config

import heads
from heads.datasets.synthetic import SYNTHETIC_CLASSES
from heads.models.task_checkpoint import load_task_checkpoint, task_checkpoint_layout, without_backbone_weights

from ..reporting import show

ROOT = Path(__file__).resolve().parents[2]
import test as test_tool  # noqa: E402
import train as train_tool  # noqa: E402

CONFIGS = sorted(str(p.relative_to(ROOT / 'configs')) for p in (ROOT / 'configs').rglob('*.py')
                 if '_base_' not in p.parts)
SIZE = (64, 64)
#: Paths that do not apply to a kind of model, and why (the test checks each model kind against this).
NOT_APPLICABLE = {
    ('Predictor', 'ImageClassifier'): 'Predictor maps an image to a label map or a depth map; a classifier gives '
                                      'class scores (its path is tools/test.py)',
    ('Predictor', 'TorchvisionDetector'): 'Predictor maps an image to a label map or a depth map; a detector gives '
                                          'boxes (its path is tools/test.py)',
    ('Predictor', 'MAEPretrainer'): 'MAE pre-training predicts no label or depth: its checkpoint feeds a '
                                    "backbone ('task' layout), whose loading tests/training/test_mae.py covers",
    ('tools/test.py', 'MAEPretrainer'): 'the MAE config has no test set or metric (test_dataloader = None)',
}
#: Backbones at a test size: the family, its block types and its levels stay, depths and widths shrink.
SMALL_BACKBONES = {
    'vit_base_patch16_224': dict(embed_dim=64, depth=4, num_heads=2, out_indices=(0, 1, 2, 3), img_size=64),
    'vit_small_patch16_224': dict(embed_dim=64, depth=4, num_heads=2, out_indices=(0, 1, 2, 3), img_size=64),
    'vit_tiny_patch16_224': dict(img_size=64),
    'vit_small_patch14_dinov2': dict(embed_dim=64, depth=4, num_heads=2, out_indices=(0, 1, 2, 3), img_size=56),
    'vit_large_patch14_reg4_dinov2': dict(embed_dim=64, depth=4, num_heads=2, img_size=64),
    'vit_small_patch16_dinov3': dict(embed_dim=64, depth=4, num_heads=2, out_indices=(0, 1, 2, 3)),
    'vit_base_patch16_dinov3': dict(embed_dim=64, depth=4, num_heads=2, out_indices=(0, 1, 2, 3)),
    'vit_base_r50_s16_384': dict(layers=(1, 1, 1), depth=2, out_indices=(0, 1, 3, 4), embed_dim=64, num_heads=2,
                                 img_size=64),
    'swin_tiny_patch4_window7_224': dict(depths=(1, 1, 1, 1)),
    'cvt_13_224': dict(depths=(1, 1, 1)),
    'coatnet_0_rw_224': dict(depths=(1, 1, 1, 1)),
    'crossvit_small_240': dict(depths=((1, 1, 0),) * 3),
    'pit_s_224': dict(depths=(1, 1, 1)),
    'levit_256': dict(depths=(1, 1, 1)),
}
TIMES: dict = {}


@pytest.fixture(scope='module', autouse=True)
def _report(request):
    yield
    if TIMES:
        show(request, 'every-config round trip, seconds per config: ' + ', '.join(
            f'{name} {seconds:.1f}' for name, seconds in TIMES.items()) + f'; {sum(TIMES.values()):.0f} in all')


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


# ----------------------------------------------------------------------------------------------- tiny datasets
def synthetic(depth: bool, size=SIZE, samples: int = 2) -> dict:
    load = dict(type='LoadAnnotations', seg=not depth, depth=depth)
    return dict(type='SyntheticScenes', num_samples=samples, size=size, seed=0, serialize_data=False,
                pipeline=[dict(type='LoadImage'), load, dict(type='PackDenseInputs')])


def image_folder(root: Path, classes) -> Path:
    """One 64x64 image per class in train/ and val/."""
    rng = np.random.default_rng(0)
    for split in ('train', 'val'):
        for name in classes:
            (root / split / name).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / split / name / '0.png'), rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8))
    return root


def coco_boxes(root: Path, classes=('Car', 'Pedestrian')) -> Path:
    """Two 64x64 images per split, each with one box of each class, in the COCO instances format."""
    rng = np.random.default_rng(0)
    (root / 'annotations').mkdir(parents=True, exist_ok=True)
    for split in ('train', 'val'):
        (root / split).mkdir(exist_ok=True)
        images, anns = [], []
        for i in range(2):
            cv2.imwrite(str(root / split / f'{i}.png'), rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8))
            images.append(dict(id=i + 1, file_name=f'{i}.png', height=SIZE[0], width=SIZE[1]))
            for c in range(len(classes)):
                anns.append(dict(id=len(anns) + 1, image_id=i + 1, category_id=c + 1, bbox=[8 + 20 * c, 10, 16, 24],
                                 area=16 * 24, iscrowd=0))
        coco = dict(images=images, annotations=anns,
                    categories=[dict(id=c + 1, name=name) for c, name in enumerate(classes)])
        (root / 'annotations' / f'instances_{split}.json').write_text(json.dumps(coco))
    return root


#: The classes of :func:`coco_panoptic_scenes`: one stuff class, then one thing class.
PANOPTIC_CATEGORIES = [dict(id=1, name='ground', isthing=0), dict(id=2, name='box', isthing=1)]


def coco_panoptic_scenes(root: Path) -> Path:
    """Two 64x64 images per split in COCO panoptic's layout (train2017/, panoptic_train2017/,
    annotations/panoptic_train2017.json, and val2017): ground everywhere but two boxes, each its own segment."""
    rng = np.random.default_rng(0)
    (root / 'annotations').mkdir(parents=True, exist_ok=True)
    for split in ('train2017', 'val2017'):
        (root / split).mkdir(exist_ok=True)
        (root / f'panoptic_{split}').mkdir(exist_ok=True)
        images, annotations = [], []
        for i in range(2):
            ids = np.full(SIZE, 1, np.int64)  # segment ids: 1 ground, 2 and 3 boxes
            ids[8 + 4 * i:30, 6:26], ids[34:56, 30 + 4 * i:60] = 2, 3
            rgb = np.stack([ids % 256, ids // 256 % 256, ids // 65536], -1).astype(np.uint8)
            cv2.imwrite(str(root / f'panoptic_{split}' / f'{i}.png'), rgb[..., ::-1])
            cv2.imwrite(str(root / split / f'{i}.jpg'), rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8))
            images.append(dict(id=i + 1, file_name=f'{i}.jpg', height=SIZE[0], width=SIZE[1]))
            segments = [dict(id=k, category_id=1 if k == 1 else 2, iscrowd=0, area=int((ids == k).sum()))
                        for k in (1, 2, 3)]
            annotations.append(dict(image_id=i + 1, file_name=f'{i}.png', segments_info=segments))
        data = dict(images=images, annotations=annotations, categories=PANOPTIC_CATEGORIES)
        (root / 'annotations' / f'panoptic_{split}.json').write_text(json.dumps(data))
    return root


# ------------------------------------------------------------------------------------------- the small config
def shrink_dense(cfg: Config) -> None:
    """A Segmentor / DepthEstimator at test size, on SyntheticScenes (labels or depth)."""
    model = cfg.model
    model.backbone.update(SMALL_BACKBONES.get(model.backbone.name, {}), pretrained=None)
    if model.neck.get('fusion_channels', 0) >= 128:  # ViT-B's neck: the ResNet levels of a hybrid keep their widths
        plain = model.neck.get('plain_levels', ())
        model.neck.hidden_channels = tuple(w if i in plain else small for i, (w, small) in
                                           enumerate(zip(model.neck.hidden_channels, (16, 32, 64, 64))))
        model.neck.fusion_channels = 32
        for head in ('decode_head', 'auxiliary_head'):
            if model.get(head):
                model[head].in_channels = 32
    if model.data_preprocessor.get('size'):
        model.data_preprocessor.size = SIZE
    depth = model.type in ('DepthEstimator', 'VideoDepthEstimator')
    if not depth:  # the synthetic scenes' classes (the metric reads them from the dataset)
        for head in ('decode_head', 'auxiliary_head'):
            if model.get(head):
                model[head].num_classes = len(SYNTHETIC_CLASSES)
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[name].dataset = synthetic(depth)
        if model.type == 'VideoDepthEstimator':  # two clips of two frames
            cfg[name].dataset = dict(type='VideoClipDataset', frames=2, dataset=synthetic(depth, samples=4))
            model.frames = 2
    if cfg.get('predict_scale'):
        cfg.predict_scale = SIZE


def shrink_mask2former(model) -> None:
    """Mask2Former's pixel decoder and decoder at test width and depth (32 wide, one deformable layer, one decoder
    layer per level, 10 queries, 512 loss points), the synthetic scenes' classes, batches padded to the test size."""
    model.pixel_decoder.update(channels=32, mask_channels=32, num_layers=1, ffn_channels=64)
    model.decoder.update(num_classes=len(SYNTHETIC_CLASSES), channels=32, mask_channels=32, num_queries=10,
                         num_layers=3, ffn_channels=64)
    model.loss.num_points = 512
    if model.data_preprocessor.get('size'):
        model.data_preprocessor.size = SIZE


def write_teacher(teacher: dict, num_classes: int, path: Path) -> None:
    """A distillation teacher's checkpoint as training here writes it (an ImageClassifier's state dict)."""
    from heads.models.classifier import ImageClassifier
    backbone = {k: v for k, v in teacher.items() if k != 'checkpoint'}
    model = ImageClassifier(backbone=backbone, num_classes=num_classes)
    torch.save({'meta': {'iter': 1}, 'state_dict': model.state_dict()}, path)


def small_config(config: str, tmp_path: Path) -> Path:
    """``config`` at test size, one training iteration, checkpointed, dumped beside its tiny data."""
    cfg = Config.fromfile(str(ROOT / 'configs' / config))
    kind = cfg.model.type
    if kind in ('Segmentor', 'DepthEstimator', 'VideoDepthEstimator'):
        shrink_dense(cfg)
    elif kind in ('EoMT', 'Mask2Former'):  # mask classification on the synthetic scenes' label maps, or COCO panoptic
        cfg.model.backbone.update(SMALL_BACKBONES.get(cfg.model.backbone.name, {}), pretrained=None)
        if kind == 'Mask2Former':
            shrink_mask2former(cfg.model)
        if cfg.model.data_preprocessor.get('size'):  # training batches padded to the test's images
            cfg.model.data_preprocessor.size = SIZE
        if cfg.model.get('test_cfg', {}).get('mode') == 'slide':  # windows of the test's image size
            cfg.model.test_cfg.update(crop_size=SIZE, stride=SIZE)
        if cfg.train_dataloader.dataset.type == 'CocoPanopticDataset':  # panoptic targets and metric
            root = coco_panoptic_scenes(tmp_path / 'coco')
            cfg.model.num_classes = len(PANOPTIC_CATEGORIES)
            cfg.model.test_cfg.stuff_classes = [0]
            load = [dict(type='LoadImage'), dict(type='LoadPanopticAnnotations'), dict(type='PackDenseInputs')]
            for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
                cfg[name].dataset.update(data_root=str(root), pipeline=load)
        else:
            if kind == 'EoMT':
                cfg.model.num_classes = len(SYNTHETIC_CLASSES)
            for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
                cfg[name].dataset = synthetic(False)
        cfg.predict_scale = SIZE
    elif kind == 'ImageClassifier':
        root = image_folder(tmp_path / 'patches', cfg.classes)
        for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
            cfg[name].dataset.data_root = str(root)
        teacher = cfg.model.get('distillation', {}).get('teacher')
        if teacher:
            write_teacher(teacher, cfg.model.num_classes, tmp_path / 'teacher.pth')
            teacher.checkpoint = str(tmp_path / 'teacher.pth')
    elif kind == 'TorchvisionDetector':
        root = coco_boxes(tmp_path / 'det')
        for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
            cfg[name].dataset.data_root = str(root)
        cfg.model.update(min_size=SIZE[0], max_size=SIZE[1], out_channels=16)
    elif kind == 'MAEPretrainer':
        img = cfg.model.backbone.img_size
        cfg.train_dataloader.dataset = synthetic(False, (img, img))
    else:
        raise AssertionError(f'{config}: a model kind this test does not know ({kind}); add its tiny data here')
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        if cfg.get(name):
            cfg[name].update(batch_size=2, num_workers=0, persistent_workers=False)
    if cfg.get('effective_batch_size'):  # accumulation over 2 iterations (not the recipe's 8 at batch 2)
        cfg.effective_batch_size = 2 * cfg.train_dataloader.batch_size
    cfg.train_cfg.update(max_iters=1, val_interval=1000, val_begin=1000)
    cfg.default_hooks.checkpoint.update(interval=1, max_keep_ckpts=-1)
    cfg.default_hooks.logger.interval = 1
    cfg.custom_hooks = [h for h in cfg.custom_hooks if h.type != 'PredictionVisualizationHook']
    cfg.visualizer = dict(type='Visualizer', vis_backends=None)  # each backend writes the config out once more
    path = tmp_path / Path(config).name
    cfg.dump(str(path))
    return path


# ------------------------------------------------------------------------------------------------- the checks
def same_state(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    different = [k for k, v in got.items() if not torch.equal(v, expected[k])]
    assert not different, different[:10]


def image() -> np.ndarray:
    return np.random.default_rng(1).integers(0, 256, (*SIZE, 3), dtype=np.uint8)




@pytest.mark.slow
@pytest.mark.parametrize('config', CONFIGS)
def test_config_round_trips_its_own_checkpoint(config, tmp_path):
    start = time.perf_counter()
    child, work = small_config(config, tmp_path), tmp_path / 'work'
    runner = train_tool.main([str(child), '--work-dir', str(work)])
    checkpoint = Path((work / 'last_checkpoint').read_text())  # iter_1.pth; iter_2.pth where batches accumulate
    assert checkpoint.is_file() and checkpoint.parent == work
    trained = {k: v.detach().clone() for k, v in runner.model.state_dict().items()}
    cfg = Config.fromfile(str(child))
    kind = cfg.model.type

    # load_task_checkpoint: this project's layout (never taken for another), every tensor as trained
    assert task_checkpoint_layout(trained, runner.model) == 'zoo'
    model = heads.MODELS.build(without_backbone_weights(cfg.model))
    report = load_task_checkpoint(model, checkpoint)
    assert report.format == 'zoo' and not (report.missing or report.unexpected or report.mismatched)
    same_state(model.state_dict(), trained)

    # tools/test.py: the metrics of the trained model
    if ('tools/test.py', kind) in NOT_APPLICABLE:
        assert not cfg.get('test_dataloader'), NOT_APPLICABLE['tools/test.py', kind]
    else:
        expected = runner.val_loop.run()  # the trained model in memory; the configs' val set and metric are the test's
        assert cfg.val_evaluator == cfg.test_evaluator and cfg.val_dataloader.dataset == cfg.test_dataloader.dataset
        assert test_tool.main([str(child), str(checkpoint), '--work-dir', str(tmp_path / 'eval')]) == expected

    # Predictor: what the trained model predicts
    if ('Predictor', kind) in NOT_APPLICABLE:
        assert kind not in ('Segmentor', 'DepthEstimator', 'VideoDepthEstimator'), NOT_APPLICABLE['Predictor', kind]
    else:
        reference = heads.Predictor(cfg)
        reference.model.load_state_dict(trained)
        np.testing.assert_array_equal(heads.Predictor(str(child), checkpoint)(image()), reference(image()))

    # --resume: from iter_1.pth (not from scratch, which would have written over it), one more iteration
    written = checkpoint.read_bytes()
    resumed = train_tool.main([str(child), '--work-dir', str(work), '--resume',
                               '--cfg-options', 'train_cfg.max_iters=2'])
    assert resumed.iter == 2 * runner.iter and Path(resumed._load_from) == checkpoint
    assert checkpoint.read_bytes() == written
    assert (work / f'iter_{resumed.iter}.pth').is_file()
    TIMES[config] = time.perf_counter() - start


def test_every_model_kind_of_the_configs_has_its_paths_or_a_reason():
    kinds = {Config.fromfile(str(ROOT / 'configs' / c)).model.type for c in CONFIGS}
    assert kinds == {'Segmentor', 'DepthEstimator', 'VideoDepthEstimator', 'ImageClassifier', 'TorchvisionDetector',
                     'MAEPretrainer', 'EoMT', 'Mask2Former'}
    assert {kind for _, kind in NOT_APPLICABLE} <= kinds
