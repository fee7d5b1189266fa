"""Panoptic and instance targets: a small COCO panoptic set in the real layout (PNG ids R + 256 G + 256^2 B, JSON
segments_info), the transforms moving its segments with the image, and CamVid's instances from its thing classes."""
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from heads.datasets import CamVidDataset, CamVidPanopticDataset, CocoPanopticDataset
from heads.io.images import ImageError
from heads.io.labels import INSTANCE_OFFSET as K
from heads.transforms import PackDenseInputs

from ..reference import shared_data

H, W = 12, 16
ROAD, CAR, PERSON, VOID = 0, 1, 2, 3
# segment ids with all three colour channels in use; category ids out of order (labels follow the listed order)
IDS = dict(road=5 + 256 * 3 + 65536 * 2, car_a=2000, car_b=70000, crowd=300)
CATEGORIES = [dict(id=7, name='road', isthing=0), dict(id=3, name='car', isthing=1),
              dict(id=9, name='person', isthing=1)]


def segment_ids() -> np.ndarray:
    """'h w': road above, two cars, a person crowd and void (0) below."""
    ids = np.zeros((H, W), np.int64)
    ids[:6] = IDS['road']
    ids[6:, 0:5], ids[6:, 5:10], ids[6:, 10:13] = IDS['car_a'], IDS['car_b'], IDS['crowd']
    return ids


def expected_panoptic() -> tuple[np.ndarray, np.ndarray]:
    """(panoptic 'h w', crowd 'h w') as PackDenseInputs must give them for :func:`segment_ids`."""
    panoptic = np.full((H, W), VOID)
    panoptic[:6], panoptic[6:, 0:5], panoptic[6:, 5:10] = ROAD, CAR, CAR + K
    crowd = np.full((H, W), VOID)
    crowd[6:, 10:13] = PERSON
    return panoptic, crowd


@pytest.fixture
def coco_panoptic(tmp_path) -> Path:
    """tmp_path/{images/a.png, panoptic/a.png, panoptic.json}; the image's R, G hold each pixel's x, y."""
    (tmp_path / 'images').mkdir()
    (tmp_path / 'panoptic').mkdir()
    ids = segment_ids()
    rgb = np.stack([ids % 256, ids // 256 % 256, ids // 65536], -1).astype(np.uint8)
    cv2.imwrite(str(tmp_path / 'panoptic' / 'a.png'), rgb[..., ::-1])  # cv2 writes BGR
    y, x = np.mgrid[:H, :W]
    image = np.stack([x, y, np.full_like(x, 7)], -1).astype(np.uint8)
    cv2.imwrite(str(tmp_path / 'images' / 'a.png'), image[..., ::-1])
    segments = [dict(id=IDS['road'], category_id=7, iscrowd=0), dict(id=IDS['car_a'], category_id=3, iscrowd=0),
                dict(id=IDS['car_b'], category_id=3, iscrowd=0), dict(id=IDS['crowd'], category_id=9, iscrowd=1)]
    for segment in segments:
        segment['area'] = int((ids == segment['id']).sum())
    data = dict(images=[dict(id=1, file_name='a.png', height=H, width=W)], categories=CATEGORIES,
                annotations=[dict(image_id=1, file_name='a.png', segments_info=segments)])
    (tmp_path / 'panoptic.json').write_text(json.dumps(data))
    return tmp_path


def build(root, *transforms, instances='all') -> CocoPanopticDataset:
    pipeline = [dict(type='LoadImage'), dict(type='LoadPanopticAnnotations', instances=instances), *transforms,
                dict(type='PackDenseInputs')]
    return CocoPanopticDataset(ann_file='panoptic.json', img_dir='images', pan_dir='panoptic', data_root=str(root),
                               pipeline=pipeline)


def load(root, *transforms, instances='all') -> dict:
    return build(root, *transforms, instances=instances)[0]


def check_consistent(sample, void: int = VOID) -> None:
    """The semantic map, the instances and the panoptic map describe the same segments."""
    panoptic, semantic = sample.gt_panoptic_seg.data[0], sample.gt_sem_seg.data[0]
    assert panoptic.dtype == torch.int64 and sample.gt_instances.masks.dtype == torch.bool
    torch.testing.assert_close(semantic, torch.where(panoptic == void, 255, panoptic % K))
    values = [panoptic[mask].unique() for mask in sample.gt_instances.masks]
    assert all(len(v) == 1 for v in values)  # each instance is one segment of the panoptic map ...
    for label, mask, value in zip(sample.gt_instances.labels, sample.gt_instances.masks, values):
        assert value % K == label
        torch.testing.assert_close(mask, panoptic == value)  # ... all of it
    numbers = [v // K for v in panoptic.unique().tolist() if v != void]  # thing instances: 0, 1, ... once each
    assert sorted(set(numbers)) == list(range(max(numbers) + 1)) and all(numbers.count(j) == 1 for j in numbers if j)


def test_coco_panoptic_fixture_gives_the_three_targets(coco_panoptic):
    out = load(coco_panoptic)
    dataset_meta = CocoPanopticDataset(ann_file=str(coco_panoptic / 'panoptic.json')).metainfo
    assert dataset_meta['classes'] == ('road', 'car', 'person')
    assert dataset_meta['thing_classes'] == ('car', 'person') and dataset_meta['stuff_classes'] == ('road',)
    sample, (panoptic, crowd) = out['data_samples'], expected_panoptic()
    np.testing.assert_array_equal(sample.gt_panoptic_seg.data[0].numpy(), panoptic)
    np.testing.assert_array_equal(sample.gt_panoptic_seg.crowd[0].numpy(), crowd)
    semantic = np.where(panoptic == VOID, 255, panoptic % K)  # crowd -> ignore too
    np.testing.assert_array_equal(sample.gt_sem_seg.data[0].numpy(), semantic)
    # instances: every non-crowd segment (the crowd person is none), or the things alone
    assert sample.gt_instances.labels.tolist() == [ROAD, CAR, CAR]
    assert sample.gt_instances.masks.shape == (3, H, W)
    assert [int(m.sum()) for m in sample.gt_instances.masks] == [6 * W, 30, 30]
    check_consistent(sample)
    things = load(coco_panoptic, instances='things')['data_samples']
    assert things.gt_instances.labels.tolist() == [CAR, CAR]
    torch.testing.assert_close(things.gt_instances.masks, sample.gt_instances.masks[1:])
    torch.testing.assert_close(things.gt_panoptic_seg.data, sample.gt_panoptic_seg.data)


def test_flip_crop_and_pad_move_every_target_with_the_image(coco_panoptic):
    panoptic, crowd = expected_panoptic()
    np.random.seed(0)
    dataset = build(coco_panoptic, dict(type='RandomFlip', prob=1.0), dict(type='RandomCrop', crop_size=(8, 10)),
                    dict(type='Pad', size=(12, 10)))
    for _ in range(4):
        out = dataset[0]
        sample, image = out['data_samples'], out['inputs'].numpy()  # '3 h w'
        assert image.shape == (3, 10, 12)
        inside = np.zeros((10, 12), bool)
        inside[:8, :10] = True
        x, y = image[0][inside].astype(int), image[1][inside].astype(int)  # the source pixel of each pixel
        assert (np.diff(x.reshape(8, 10), axis=1) == -1).all() and (np.diff(y.reshape(8, 10), axis=0) == 1).all()
        for target, source in ((sample.gt_panoptic_seg.data, panoptic), (sample.gt_panoptic_seg.crowd, crowd)):
            np.testing.assert_array_equal(target[0].numpy()[inside], source[y, x])
            assert (target[0].numpy()[~inside] == VOID).all()  # padding is void
        assert (sample.gt_sem_seg.data[0].numpy()[~inside] == 255).all()
        # instances: only the segments still present
        present = [c for c in (ROAD, CAR, CAR + K) if (panoptic[y, x] == c).any()]
        assert len(sample.gt_instances.labels) == len(present)
        check_consistent(sample)


def test_resize_is_nearest_for_every_target_and_test_pipelines_keep_the_original(coco_panoptic):
    panoptic, _ = expected_panoptic()
    sample = load(coco_panoptic, dict(type='Resize', scale=(2 * W, 2 * H), keep_ratio=False))['data_samples']
    np.testing.assert_array_equal(sample.gt_panoptic_seg.data[0].numpy(), panoptic.repeat(2, 0).repeat(2, 1))
    check_consistent(sample)
    dataset = CocoPanopticDataset(ann_file='panoptic.json', img_dir='images', pan_dir='panoptic',
                                  data_root=str(coco_panoptic), pipeline=[
                                      dict(type='LoadImage'), dict(type='Resize', scale=(2 * W, 2 * H)),
                                      dict(type='LoadPanopticAnnotations'), dict(type='PackDenseInputs')])
    out = dataset[0]
    assert out['inputs'].shape[-2:] == (2 * H, 2 * W)
    np.testing.assert_array_equal(out['data_samples'].gt_panoptic_seg.data[0].numpy(), panoptic)


def test_the_coco_panoptic_config_piece_reads_the_real_layout(coco_panoptic):
    from mmengine.config import Config

    from heads.registry import DATASETS
    cfg = Config.fromfile(str(Path(__file__).resolve().parents[2] / 'configs/_base_/datasets/coco_panoptic.py'))
    (coco_panoptic / 'annotations').mkdir()
    (coco_panoptic / 'panoptic.json').rename(coco_panoptic / 'annotations' / 'panoptic_val2017.json')
    (coco_panoptic / 'images').rename(coco_panoptic / 'val2017')
    (coco_panoptic / 'panoptic').rename(coco_panoptic / 'panoptic_val2017')
    sample = DATASETS.build(dict(cfg.val_dataloader.dataset, data_root=str(coco_panoptic)))[0]['data_samples']
    np.testing.assert_array_equal(sample.gt_panoptic_seg.data[0].numpy(), expected_panoptic()[0])


def test_bad_annotations_are_named(coco_panoptic):
    data = json.loads((coco_panoptic / 'panoptic.json').read_text())
    data['annotations'][0]['segments_info'].pop(1)  # car_a is in the PNG but no longer listed
    (coco_panoptic / 'panoptic.json').write_text(json.dumps(data))
    with pytest.raises(ImageError, match=f"a.png has segment ids \\[{IDS['car_a']}\\]"):
        load(coco_panoptic)
    (coco_panoptic / 'bad.json').write_text(json.dumps(dict(images=[], annotations=[])))
    with pytest.raises(ValueError, match="bad.json has no list 'categories'"):
        CocoPanopticDataset(ann_file=str(coco_panoptic / 'bad.json'))
    with pytest.raises(KeyError, match="num_classes"):
        PackDenseInputs()(dict(img=np.zeros((2, 2, 3), np.uint8), gt_segment_map=np.zeros((2, 2), np.int32),
                               segments=[]))


def test_camvid_instances_are_the_connected_components_of_its_thing_classes():
    camvid = shared_data('camvid', 'images', 'val').parents[1]
    pipeline = [dict(type='LoadImage'), dict(type='LoadPanopticAnnotations'), dict(type='PackDenseInputs')]
    dataset = CamVidPanopticDataset(str(camvid), split='val', pipeline=pipeline)
    semantic_dataset = CamVidDataset(str(camvid), split='val', pipeline=[
        dict(type='LoadImage'), dict(type='LoadAnnotations'), dict(type='PackDenseInputs')])
    things = [dataset.metainfo['classes'].index(n) for n in ('Car', 'Pedestrian', 'Bicyclist')]
    assert dataset.metainfo['thing_classes'] == ('Car', 'Pedestrian', 'Bicyclist')
    sample = dataset[0]['data_samples']
    labels = semantic_dataset[0]['data_samples'].gt_sem_seg.data[0]
    panoptic, crowd = sample.gt_panoptic_seg.data[0], sample.gt_panoptic_seg.crowd[0]
    instances = sample.gt_instances
    is_thing_instance = torch.isin(instances.labels, torch.tensor(things))
    assert is_thing_instance.sum() > 1
    for label, mask in zip(instances.labels[is_thing_instance], instances.masks[is_thing_instance]):
        assert (labels[mask] == label).all() and mask.sum() >= 64
        assert cv2.connectedComponents(mask.numpy().astype(np.uint8), connectivity=8)[0] == 2  # background + one
    for label, mask in zip(instances.labels[~is_thing_instance], instances.masks[~is_thing_instance]):
        torch.testing.assert_close(mask, labels == label)  # a stuff class present: one segment, all of it
    is_thing = torch.isin(labels, torch.tensor(things))
    covered = instances.masks[is_thing_instance].any(0) | (crowd != 11)
    torch.testing.assert_close(covered, is_thing)  # every thing pixel: an instance or the small-region crowd
    stuff = ~is_thing & (labels != 255)
    torch.testing.assert_close(panoptic[stuff], labels[stuff])  # stuff: label, instance 0
    torch.testing.assert_close(sample.gt_sem_seg.data[0], torch.where(crowd != 11, 255, labels))
    check_consistent(sample, void=11)


def test_the_camvid_panoptic_config_piece_scores_its_ground_truth_perfectly():
    camvid = shared_data('camvid', 'images', 'val').parents[1]
    from mmengine.config import Config
    from mmengine.structures import InstanceData

    from heads.registry import DATASETS, METRICS
    cfg = Config.fromfile(str(Path(__file__).resolve().parents[2] / 'configs/_base_/datasets/camvid_panoptic.py'))
    dataset = DATASETS.build(dict(cfg.val_dataloader.dataset, data_root=str(camvid)))
    stuff = [dataset.metainfo['classes'].index(name) for name in dataset.metainfo['stuff_classes']]
    assert cfg.stuff_classes == stuff
    metrics = [METRICS.build(m) for m in cfg.val_evaluator]
    for metric in metrics:
        metric.dataset_meta = dataset.metainfo
    for i in range(2):
        out = dataset[i]
        sample = out['data_samples']
        assert out['inputs'].shape[-2:] == (180, 240) and sample.gt_sem_seg.shape == (360, 480)
        sample.pred_sem_seg, sample.pred_panoptic_seg = sample.gt_sem_seg, sample.gt_panoptic_seg
        sample.pred_instances = InstanceData(scores=torch.ones(len(sample.gt_instances)), **sample.gt_instances)
        for metric in metrics:
            metric.process({}, [sample.to_dict()])
    results = {k: v for metric in metrics for k, v in metric.compute_metrics(metric.results).items()}
    assert results['mIoU'] == results['PQ'] == results['PQ_th'] == results['PQ_st'] == 100.0
    assert results['segm_mAP'] == 1.0
