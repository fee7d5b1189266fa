"""Datasets on the real shared data (ADE20K samples, CamVid, 7-Scenes), a COCO JSON written here, folder
errors, and the procedural SyntheticScenes. Expected labels come from reading the raw files with cv2 here."""
import csv
import json

import cv2
import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils

from heads.datasets import (
    ADE20KDataset,
    CamVidDataset,
    CocoSegDataset,
    FolderSegDataset,
    RGBDDepthDataset,
    SyntheticScenes,
)
from heads.registry import DATASETS

from ..reference import shared_data

SEG_PIPELINE = [dict(type='LoadImage'), dict(type='LoadAnnotations'), dict(type='PackDenseInputs')]
DEPTH_PIPELINE = [dict(type='LoadImage'), dict(type='LoadAnnotations', seg=False, depth=True),
                  dict(type='PackDenseInputs')]


def raw_png(path):
    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED)


# --------------------------------------------------------------------------------------------- ADE20K
@pytest.mark.parametrize('root', ['parent', 'ADEChallengeData2016'])
def test_ade20k_samples_load_with_reduced_labels(root):
    parent = shared_data('ade20k-samples')
    dataset = ADE20KDataset(str(parent if root == 'parent' else parent / 'ADEChallengeData2016'),
                            split='validation', pipeline=SEG_PIPELINE)
    assert len(dataset) == 3
    sizes = []
    for i in range(3):
        out = dataset[i]
        meta = out['data_samples'].metainfo
        raw = raw_png(meta['seg_map_path']).astype(np.int64)
        expected = np.where(raw == 0, 255, raw - 1)  # 0 = "other" -> ignore, k -> k - 1
        np.testing.assert_array_equal(out['data_samples'].gt_sem_seg.data[0].numpy(), expected)
        rgb = cv2.imread(meta['img_path'])[..., ::-1]
        np.testing.assert_array_equal(out['inputs'].permute(1, 2, 0).numpy(), rgb)
        assert meta['reduce_zero_label'] is True and meta['ori_shape'] == raw.shape
        sizes.append((raw.shape[1], raw.shape[0]))
    assert sizes == [(683, 512), (500, 364), (400, 300)]  # w x h, as in the README


def test_ade20k_metainfo_matches_object_info_csv():
    with open(shared_data('ade20k-samples', 'objectInfo150.csv')) as f:
        rows = list(csv.DictReader(f))
    classes, palette = ADE20KDataset.METAINFO['classes'], ADE20KDataset.METAINFO['palette']
    assert len(classes) == len(palette) == 150 and len({tuple(c) for c in palette}) >= 149
    for name, row in zip(classes, rows):
        assert row['Name'].split(';')[0] == name.split()[0]
    assert classes[:3] == ('wall', 'building', 'sky') and palette[0] == [120, 120, 120]


# --------------------------------------------------------------------------------------------- CamVid
def test_camvid_counts_classes_and_palette():
    root = shared_data('camvid')
    train, val = CamVidDataset(str(root), split='train'), CamVidDataset(str(root), split='val')
    assert (len(train), len(val)) == (367, 101)
    assert train.metainfo['classes'] == ('Sky', 'Building', 'Pole', 'Road', 'Pavement', 'Tree', 'SignSymbol',
                                         'Fence', 'Car', 'Pedestrian', 'Bicyclist')
    assert train.metainfo['palette'][0] == [128, 128, 128] and train.metainfo['palette'][4] == [60, 40, 222]
    assert train.metainfo['palette'][10] == [0, 128, 192]


def test_camvid_void_becomes_ignore():
    root = shared_data('camvid')
    dataset = CamVidDataset(str(root), split='val', pipeline=SEG_PIPELINE, lazy_init=True)
    for i in range(len(dataset)):
        raw = raw_png(dataset.get_data_info(i)['seg_map_path'])
        if (raw == 11).any():
            break
    labels = dataset[i]['data_samples'].gt_sem_seg.data[0].numpy()
    np.testing.assert_array_equal(labels, np.where(raw == 11, 255, raw))
    assert labels.shape == (360, 480) and labels.max() == 255 and (raw == 11).any()


# --------------------------------------------------------------------------------------------- 7-Scenes
def test_seven_scenes_depth_in_metres():
    root = shared_data('depth-7scenes')
    train = RGBDDepthDataset(str(root), 'train.txt', pipeline=DEPTH_PIPELINE)
    assert len(train) == 350 and len(RGBDDepthDataset(str(root), 'val.txt')) == 40
    out = train[0]
    raw = raw_png(out['data_samples'].metainfo['depth_path'])
    assert raw.dtype == np.uint16
    expected = np.where((raw == 0) | (raw == 65535), 0.0, raw / 1000.0)
    depth = out['data_samples'].gt_depth.data[0].numpy()
    np.testing.assert_allclose(depth, expected, rtol=1e-6)
    valid = depth[depth > 0]
    assert 0.5 < valid.min() < 1.2 and 2.5 < valid.max() < 4.5
    assert 0.02 < (depth == 0).mean() < 0.3 and out['inputs'].shape == (3, 480, 640)


def test_list_file_blank_lines_and_missing_frames(tmp_path):
    root = shared_data('depth-7scenes')
    (tmp_path / 'list.txt').write_text('frame-000000\n\n  \nframe-000002\n')
    dataset = RGBDDepthDataset(str(root), str(tmp_path / 'list.txt'))
    assert len(dataset) == 2 and dataset.get_data_info(1)['depth_invalid'] == [0, 65535]
    (tmp_path / 'bad.txt').write_text('frame-999999\n')
    with pytest.raises(FileNotFoundError, match='frame-999999'):
        RGBDDepthDataset(str(root), str(tmp_path / 'bad.txt'))


# --------------------------------------------------------------------------------------------- COCO
def polygon(x0, y0, x1, y1):
    return [[x0, y0, x1, y0, x1, y1, x0, y1]]


def test_coco_annotations_render_to_a_semantic_map(tmp_path):
    images = sorted(shared_data('camvid', 'images', 'val').glob('*.jpg'))[:2]
    h, w = 360, 480
    person = np.zeros((h, w), np.uint8)
    person[100:180, 300:340] = 1
    person_rle = mask_utils.encode(np.asfortranarray(person))
    person_rle['counts'] = person_rle['counts'].decode()
    coco = {
        'images': [{'id': 1, 'file_name': images[0].name, 'height': h, 'width': w},
                   {'id': 2, 'file_name': images[1].name, 'height': h, 'width': w},
                   {'id': 3, 'file_name': 'unannotated.jpg', 'height': h, 'width': w}],
        'categories': [{'id': 3, 'name': 'car'}, {'id': 7, 'name': 'person'}, {'id': 9, 'name': 'road'}],
        'annotations': [  # the small car is listed before the large road it sits on
            {'id': 10, 'image_id': 1, 'category_id': 3, 'segmentation': polygon(100, 250, 140, 270),
             'area': 800, 'bbox': [100, 250, 40, 20], 'iscrowd': 0},
            {'id': 11, 'image_id': 1, 'category_id': 9, 'segmentation': polygon(0, 200, 479, 359),
             'area': 76000, 'bbox': [0, 200, 479, 159], 'iscrowd': 0},
            {'id': 12, 'image_id': 2, 'category_id': 7, 'segmentation': person_rle, 'area': 3200,
             'bbox': [300, 100, 40, 80], 'iscrowd': 1}]}
    ann_file = tmp_path / 'coco.json'
    ann_file.write_text(json.dumps(coco))
    dataset = CocoSegDataset(str(ann_file), img_dir=str(images[0].parent), pipeline=SEG_PIPELINE)
    assert len(dataset) == 2  # the image without annotations is skipped
    assert dataset.metainfo['classes'] == ('car', 'person', 'road')  # ids 3, 7, 9 -> labels 0, 1, 2
    first = dataset[0]['data_samples'].gt_sem_seg.data[0].numpy()
    assert first.shape == (h, w)
    assert (first[252:268, 102:138] == 0).all()  # car, drawn over the road
    assert (first[202:248, :478] == 2).all() and (first[272:358, 2:478] == 2).all()  # road around it
    assert (first[:198] == 255).all()  # nothing annotated above the road
    assert abs(int((first == 0).sum()) - 41 * 21) <= 2 * (41 + 21)  # about the polygon's area
    second = dataset[1]['data_samples'].gt_sem_seg.data[0].numpy()
    np.testing.assert_array_equal(second, np.where(person == 1, 1, 255))  # RLE decodes exactly

    only_road = CocoSegDataset(str(ann_file), img_dir=str(images[0].parent), classes=('road', 'car'))
    assert len(only_road) == 1 and only_road.metainfo['classes'] == ('road', 'car')
    labels = only_road.get_data_info(0)['gt_seg_map']
    assert labels[260, 120] == 1 and labels[300, 300] == 0


# --------------------------------------------------------------------------------------------- folders
def make_folder(root, stems, label_stems=None, size=(6, 8)):
    (root / 'img').mkdir(parents=True)
    (root / 'ann').mkdir(parents=True)
    for stem in stems:
        cv2.imwrite(str(root / 'img' / f'{stem}.png'), np.zeros((*size, 3), np.uint8))
    for stem in stems if label_stems is None else label_stems:
        cv2.imwrite(str(root / 'ann' / f'{stem}.png'), np.full(size, 3, np.uint8))


def test_folder_dataset_pairs_by_stem(tmp_path):
    make_folder(tmp_path, ['b', 'a'])
    dataset = FolderSegDataset(str(tmp_path), 'img', 'ann', img_suffix='.png', reduce_zero_label=True,
                               classes=('x', 'y', 'z'), pipeline=SEG_PIPELINE)
    assert len(dataset) == 2 and dataset.get_data_info(0)['img_path'].endswith('a.png')
    assert dataset.get_data_info(0)['seg_map_path'].endswith('a.png')
    assert (dataset[0]['data_samples'].gt_sem_seg.data == 2).all()  # 3 reduced to 2
    assert len(dataset.metainfo['palette']) == 3


def test_missing_annotation_names_the_image(tmp_path):
    make_folder(tmp_path, ['a', 'lonely_frame'], label_stems=['a'])
    with pytest.raises(FileNotFoundError, match='lonely_frame'):
        FolderSegDataset(str(tmp_path), 'img', 'ann', img_suffix='.png')


def test_empty_or_missing_folder_says_what_was_expected(tmp_path):
    (tmp_path / 'images' / 'train').mkdir(parents=True)
    (tmp_path / 'annotations' / 'train').mkdir(parents=True)
    with pytest.raises(ValueError, match='images/train') as info:
        CamVidDataset(str(tmp_path), split='train')
    assert '*.jpg' in str(info.value)
    with pytest.raises(FileNotFoundError, match='ADEChallengeData2016'):
        ADE20KDataset(str(tmp_path / 'nowhere'))
    lazy = ADE20KDataset(str(tmp_path / 'nowhere'), lazy_init=True)  # nothing is read before use
    with pytest.raises(FileNotFoundError):
        len(lazy)


def test_three_channel_label_file_through_a_dataset(tmp_path):
    make_folder(tmp_path, ['a'], label_stems=[])
    cv2.imwrite(str(tmp_path / 'ann' / 'a.png'), np.zeros((6, 8, 3), np.uint8))
    dataset = FolderSegDataset(str(tmp_path), 'img', 'ann', img_suffix='.png', pipeline=SEG_PIPELINE)
    with pytest.raises(ValueError, match='single-channel index PNG'):
        dataset[0]


# --------------------------------------------------------------------------------------------- synthetic
@pytest.mark.slow
def test_synthetic_scenes_are_deterministic_and_consistent():
    first, again = SyntheticScenes(num_samples=8, seed=0), SyntheticScenes(num_samples=8, seed=0)
    other = SyntheticScenes(num_samples=8, seed=1)
    for i in range(8):
        a, b, c = first.get_data_info(i), again.get_data_info(i), other.get_data_info(i)
        for key in ('img', 'gt_seg_map', 'gt_depth'):
            np.testing.assert_array_equal(a[key], b[key])
        assert not np.array_equal(a['img'], c['img'])
        assert a['img'].shape == (96, 128, 3) and a['img'].dtype == np.uint8
        labels, depth = a['gt_seg_map'], a['gt_depth']
        assert labels.dtype == np.uint8 and depth.dtype == np.float32
        assert set(np.unique(labels)) <= {0, 1, 2, 3} and {0, 1} <= set(np.unique(labels))
        assert {2, 3} & set(np.unique(labels))  # at least one object is visible
        assert (depth[labels == 0] == 0).all() and (depth[labels != 0] > 0).all()
        assert depth.max() <= 20.0 and a['img_path'] == f'synthetic://seed0/{i}'
    assert not np.array_equal(first.get_data_info(0)['img'], first.get_data_info(1)['img'])


@pytest.mark.slow
def test_synthetic_ground_depth_grows_toward_the_horizon():
    info = SyntheticScenes(num_samples=1, seed=3).get_data_info(0)
    labels, depth = info['gt_seg_map'], info['gt_depth']
    row_depths = [np.unique(depth[r][labels[r] == 1]) for r in range(labels.shape[0])]
    row_depths = [d for d in row_depths if d.size]
    assert all(d.size == 1 for d in row_depths)  # a flat ground plane: one depth per image row
    row_depths = np.concatenate(row_depths)
    assert (np.diff(row_depths) <= 0).all() and row_depths[0] == 20.0 and row_depths[-1] < 5.0
    for kind in (2, 3):  # objects have one depth each, and there are at most three
        assert np.unique(depth[labels == kind]).size <= 3


@pytest.mark.slow
def test_synthetic_scenes_from_the_registry_with_a_pipeline():
    dataset = DATASETS.build(dict(type='SyntheticScenes', num_samples=4, size=(48, 64), seed=7, lazy_init=True,
                                  pipeline=[dict(type='LoadImage'), dict(type='LoadAnnotations', depth=True),
                                            dict(type='RandomFlip', prob=1.0), dict(type='PackDenseInputs')]))
    out = dataset[2]
    assert len(dataset) == 4 and dataset.metainfo['classes'] == ('sky', 'ground', 'box', 'disc')
    assert out['inputs'].shape == (3, 48, 64) and out['inputs'].dtype == torch.uint8
    sample = out['data_samples']
    assert sample.gt_sem_seg.data.shape == sample.gt_depth.data.shape == (1, 48, 64)
    raw = dataset.get_data_info(2)
    np.testing.assert_array_equal(sample.gt_sem_seg.data[0].numpy(), raw['gt_seg_map'][:, ::-1])
    assert sample.metainfo['img_path'] == 'synthetic://seed7/2' and sample.metainfo['flip'] is True
