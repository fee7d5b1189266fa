"""Data transforms: loading, label encoding, geometric and photometric augmentation, packing, errors.

Expected values are computed by hand in each test (array slicing, integer arithmetic, numpy's own RNG
stream), never by the transform under test.
"""
import cv2
import numpy as np
import pytest
import torch
from mmengine.structures import BaseDataElement, PixelData

from heads.registry import TRANSFORMS
from heads.transforms import (
    LoadAnnotations,
    LoadImage,
    PackDenseInputs,
    Pad,
    PhotoMetricDistortion,
    RandomCrop,
    RandomFlip,
    RandomResize,
    Resize,
)


def write_png(path, array):
    assert cv2.imwrite(str(path), array)
    return str(path)


def sample(h=6, w=8, seed=0):
    """A hand-made result dict: random RGB image, labels in {0, 3, 7, 255}, depth with invalid zeros."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    labels = rng.choice(np.array([0, 3, 7, 255], np.uint8), (h, w))
    depth = rng.uniform(0.5, 4.0, (h, w)).astype(np.float32)
    depth[rng.random((h, w)) < 0.3] = 0.0
    return dict(img=img, gt_seg_map=labels, gt_depth=depth, img_shape=(h, w), ori_shape=(h, w),
                seg_fields=['gt_seg_map', 'gt_depth'])


# --------------------------------------------------------------------------------------------- loading
def test_load_image_is_rgb_and_sets_shapes(tmp_path):
    bgr = np.zeros((3, 5, 3), np.uint8)
    bgr[..., 0] = 10  # blue
    bgr[..., 2] = 200  # red
    path = write_png(tmp_path / 'a.png', bgr)
    results = LoadImage()({'img_path': path})
    assert results['img'].dtype == np.uint8 and results['img'].shape == (3, 5, 3)
    assert (results['img'][..., 0] == 200).all() and (results['img'][..., 2] == 10).all()
    assert results['ori_shape'] == results['img_shape'] == (3, 5)


@pytest.mark.parametrize('payload', [b'this is not an image', 'truncated'])
def test_load_image_rejects_corrupt_bytes_naming_the_file(tmp_path, payload):
    if payload == 'truncated':
        ok, encoded = cv2.imencode('.jpg', np.full((64, 64, 3), 128, np.uint8))
        payload = encoded.tobytes()[:60]
    path = tmp_path / 'broken_frame.jpg'
    path.write_bytes(payload)
    with pytest.raises(ValueError, match='broken_frame.jpg') as info:
        LoadImage()({'img_path': str(path)})
    assert 'corrupt' in str(info.value)


def test_load_image_keeps_an_in_memory_image():
    img = np.full((4, 6, 3), 7, np.uint8)
    results = LoadImage()({'img': img, 'img_path': 'synthetic://0'})
    assert results['img'] is img and results['ori_shape'] == (4, 6)


def test_reduce_zero_label_and_label_map_follow_mmseg(tmp_path):
    raw = np.array([[0, 1, 2], [150, 254, 255], [11, 3, 0]], np.uint8)
    path = write_png(tmp_path / 'l.png', raw)
    load = LoadAnnotations()
    reduced = load({'seg_map_path': path, 'reduce_zero_label': True})['gt_seg_map']
    # 0 -> 255 (ignore), k -> k - 1, 255 stays 255
    assert reduced.tolist() == [[255, 0, 1], [149, 253, 255], [10, 2, 255]]
    assert reduced.dtype == np.uint8
    mapped = load({'seg_map_path': path, 'label_map': {11: 255, 3: 1}})['gt_seg_map']
    assert mapped.tolist() == [[0, 1, 2], [150, 254, 255], [255, 1, 0]]
    # label_map first, then reduce_zero_label: 3 -> 1 -> 0 and 11 -> 255 -> 255
    both = load({'seg_map_path': path, 'label_map': {11: 255, 3: 1}, 'reduce_zero_label': True})['gt_seg_map']
    assert both.tolist() == [[255, 0, 1], [149, 253, 255], [255, 0, 255]]


def test_depth_is_metres_with_invalid_values_zeroed(tmp_path):
    raw = np.array([[0, 1000, 65535], [2500, 800, 4000]], np.uint16)
    path = write_png(tmp_path / 'd.png', raw)
    results = LoadAnnotations(seg=False, depth=True)({'depth_path': path, 'depth_scale': 1000.0,
                                                      'depth_invalid': [0, 65535]})
    assert results['gt_depth'].dtype == np.float32
    np.testing.assert_allclose(results['gt_depth'], [[0, 1.0, 0], [2.5, 0.8, 4.0]], rtol=1e-6)
    assert results['seg_fields'] == ['gt_depth']


def test_label_and_depth_size_mismatch_names_both_files(tmp_path):
    img = write_png(tmp_path / 'photo_17.png', np.zeros((4, 6, 3), np.uint8))
    label = write_png(tmp_path / 'photo_17_label.png', np.zeros((5, 6), np.uint8))
    depth = write_png(tmp_path / 'photo_17_depth.png', np.zeros((4, 7), np.uint16))
    results = LoadImage()({'img_path': img, 'seg_map_path': label, 'depth_path': depth})
    with pytest.raises(ValueError, match='photo_17_label.png') as info:
        LoadAnnotations()(dict(results))
    assert 'photo_17.png' in str(info.value) and '5x6' in str(info.value) and '4x6' in str(info.value)
    with pytest.raises(ValueError, match='photo_17_depth.png') as info:
        LoadAnnotations(seg=False, depth=True)(dict(results))
    assert 'photo_17.png' in str(info.value)


def test_three_channel_label_file_is_rejected(tmp_path):
    path = write_png(tmp_path / 'colour_label.png', np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ValueError, match='colour_label.png') as info:
        LoadAnnotations()({'seg_map_path': path})
    assert 'single-channel' in str(info.value)


def test_in_memory_annotations_are_kept():
    labels, depth = np.ones((2, 3), np.uint8), np.ones((2, 3), np.float32)
    results = LoadAnnotations(depth=True)({'gt_seg_map': labels, 'gt_depth': depth, 'ori_shape': (2, 3)})
    assert results['gt_seg_map'] is labels and results['gt_depth'] is depth


# --------------------------------------------------------------------------------------------- resize
def test_resize_exact_factors_use_nearest_for_labels_and_depth():
    results = sample(h=6, w=8)
    labels, depth = results['gt_seg_map'].copy(), results['gt_depth'].copy()
    up = Resize(scale=(16, 12), keep_ratio=False)(dict(results))  # (w, h): twice the size
    expected_labels = labels.repeat(2, axis=0).repeat(2, axis=1)
    expected_depth = depth.repeat(2, axis=0).repeat(2, axis=1)
    assert up['img'].shape == (12, 16, 3) and up['img_shape'] == (12, 16)
    np.testing.assert_array_equal(up['gt_seg_map'], expected_labels)
    np.testing.assert_array_equal(up['gt_depth'], expected_depth)  # invalid zeros stay exactly 0
    down = Resize(scale=(4, 3), keep_ratio=False)(dict(results))  # half the size
    np.testing.assert_array_equal(down['gt_seg_map'], labels[::2, ::2])
    np.testing.assert_array_equal(down['gt_depth'], depth[::2, ::2])


def test_random_resize_mixes_no_labels_or_depths():
    results = sample(h=37, w=53, seed=1)
    labels, depth = results['gt_seg_map'].copy(), results['gt_depth'].copy()
    np.random.seed(3)
    out = RandomResize(scale=(100, 50), ratio_range=(0.5, 2.0))(dict(results))
    assert set(np.unique(out['gt_seg_map'])) <= set(np.unique(labels))
    assert set(np.unique(out['gt_depth'])) <= set(np.unique(depth))  # no interpolated depths
    assert out['gt_seg_map'].shape == out['gt_depth'].shape == out['img'].shape[:2]


def test_random_resize_scale_follows_mmseg():
    np.random.seed(0)
    ratio = np.random.random_sample() * (2.0 - 0.5) + 0.5  # the draw RandomResize makes after the same seed
    long_edge, short_edge = int(100 * ratio), int(50 * ratio)
    factor = min(long_edge / 40, short_edge / 20)  # image is 20 x 40 (h x w)
    expected = (int(20 * factor + 0.5), int(40 * factor + 0.5))
    np.random.seed(0)
    out = RandomResize(scale=(100, 50), ratio_range=(0.5, 2.0))(sample(h=20, w=40))
    assert out['img_shape'] == out['img'].shape[:2] == expected
    assert out['ori_shape'] == (20, 40)


def test_keep_ratio_fits_long_and_short_edges():
    results = {'img': np.zeros((300, 400, 3), np.uint8)}
    out = Resize(scale=(2048, 512))(results)  # factor = min(2048 / 400, 512 / 300) = 512 / 300
    assert out['img'].shape[:2] == (512, 683)  # 400 * 512 / 300 = 682.67


def test_resize_before_annotations_leaves_ground_truth_unresized(tmp_path):
    img = write_png(tmp_path / 'i.png', np.zeros((10, 20, 3), np.uint8))
    label = write_png(tmp_path / 'l.png', np.ones((10, 20), np.uint8))
    results = Resize(scale=(40, 40))(LoadImage()({'img_path': img, 'seg_map_path': label, 'seg_fields': []}))
    results = LoadAnnotations()(results)
    assert results['img'].shape[:2] == (20, 40) and results['gt_seg_map'].shape == (10, 20)


# --------------------------------------------------------------------------------------------- crop
def test_random_crop_cuts_all_fields_identically():
    results = sample(h=20, w=30, seed=2)
    img, labels, depth = (results[k].copy() for k in ('img', 'gt_seg_map', 'gt_depth'))
    np.random.seed(5)
    y1, x1 = np.random.randint(0, 20 - 8 + 1), np.random.randint(0, 30 - 10 + 1)
    np.random.seed(5)
    out = RandomCrop(crop_size=(8, 10))(results)
    np.testing.assert_array_equal(out['img'], img[y1:y1 + 8, x1:x1 + 10])
    np.testing.assert_array_equal(out['gt_seg_map'], labels[y1:y1 + 8, x1:x1 + 10])
    np.testing.assert_array_equal(out['gt_depth'], depth[y1:y1 + 8, x1:x1 + 10])
    assert out['img_shape'] == (8, 10)


def test_crop_larger_than_the_image_spans_the_whole_extent():
    out = RandomCrop(crop_size=(8, 10))(sample(h=5, w=7))
    assert out['img'].shape == (5, 7, 3) and out['gt_seg_map'].shape == out['gt_depth'].shape == (5, 7)
    out = RandomCrop(crop_size=(8, 10))(sample(h=5, w=20))
    assert out['img'].shape == (5, 10, 3)


def _balanced(crop, ratio=0.75):
    counts = np.array([(crop == c).sum() for c in (1, 2)])
    counts = counts[counts > 0]
    return len(counts) > 1 and counts.max() / counts.sum() < ratio


def test_cat_max_ratio_retries_until_no_class_dominates():
    labels = np.ones((40, 40), np.uint8)
    labels[36:] = 2  # 90% class 1; 8x8 crops mix classes only where they reach the bottom rows
    results = dict(img=np.zeros((40, 40, 3), np.uint8), gt_seg_map=labels, seg_fields=['gt_seg_map'])
    # Find a seed whose first draw is too uniform but a later one (within the 10 retries) is mixed enough,
    # following mmseg's protocol: draw (y1, x1); while unbalanced, up to 10 times, draw again.
    for seed in range(200):
        np.random.seed(seed)
        draws = [(np.random.randint(0, 33), np.random.randint(0, 33)) for _ in range(11)]
        ok = [_balanced(labels[y:y + 8, x:x + 8]) for y, x in draws]
        if not ok[0] and any(ok):
            break
    y1, x1 = draws[ok.index(True)]
    np.random.seed(seed)
    out = RandomCrop(crop_size=8, cat_max_ratio=0.75)(dict(results))
    np.testing.assert_array_equal(out['gt_seg_map'], labels[y1:y1 + 8, x1:x1 + 8])
    assert set(np.unique(out['gt_seg_map'])) == {1, 2}
    np.random.seed(seed)  # without the ratio, the first (all class 1) draw is kept
    out = RandomCrop(crop_size=8)(dict(results))
    np.testing.assert_array_equal(out['gt_seg_map'], labels[draws[0][0]:draws[0][0] + 8, draws[0][1]:draws[0][1] + 8])


# --------------------------------------------------------------------------------------------- flip / pad
def test_flip_mirrors_every_field():
    results = sample(h=4, w=5)
    img, labels, depth = (results[k].copy() for k in ('img', 'gt_seg_map', 'gt_depth'))
    out = RandomFlip(prob=1.0)(dict(results))
    assert out['flip'] is True and out['flip_direction'] == 'horizontal'
    np.testing.assert_array_equal(out['img'], img[:, ::-1])
    np.testing.assert_array_equal(out['gt_seg_map'], labels[:, ::-1])
    np.testing.assert_array_equal(out['gt_depth'], depth[:, ::-1])
    assert out['img'].flags['C_CONTIGUOUS']
    kept = RandomFlip(prob=0.0)(sample(h=4, w=5))
    assert kept['flip'] is False
    np.testing.assert_array_equal(kept['img'], img)


def test_pad_values_per_field():
    results = sample(h=5, w=7)
    img, labels, depth = (results[k].copy() for k in ('img', 'gt_seg_map', 'gt_depth'))
    out = Pad(size_divisor=4)(results)
    assert out['img'].shape == (8, 8, 3) and out['pad_shape'] == (8, 8)
    np.testing.assert_array_equal(out['img'][:5, :7], img)
    np.testing.assert_array_equal(out['gt_seg_map'][:5, :7], labels)
    np.testing.assert_array_equal(out['gt_depth'][:5, :7], depth)
    assert (out['img'][5:] == 0).all() and (out['img'][:, 7:] == 0).all()
    assert (out['gt_seg_map'][5:] == 255).all() and (out['gt_seg_map'][:, 7:] == 255).all()
    assert (out['gt_depth'][5:] == 0).all() and (out['gt_depth'][:, 7:] == 0).all()
    fixed = Pad(size=(10, 6), pad_val=9, seg_pad_val=250)(sample(h=5, w=7))  # size is (w, h)
    assert fixed['img'].shape == (6, 10, 3) and (fixed['img'][5] == 9).all()
    assert (fixed['gt_seg_map'][:, 7:] == 250).all()
    with pytest.raises(ValueError, match='smaller'):
        Pad(size=(4, 4))(sample(h=5, w=7))


# --------------------------------------------------------------------------------------------- photometric
def test_photometric_distortion_keeps_dtype_shape_and_changes_the_image():
    img = sample(h=16, w=16)['img']
    changed = 0
    for seed in range(4):
        np.random.seed(seed)
        out = PhotoMetricDistortion()({'img': img.copy()})['img']
        assert out.dtype == np.uint8 and out.shape == img.shape
        changed += int(not np.array_equal(out, img))
    assert changed >= 3  # each seed skips all four distortions with probability 1/16


def test_photometric_contrast_is_a_clipped_scale():
    gray = np.full((4, 4, 3), 100, np.uint8)  # no saturation, so the HSV round trips are exact
    outputs = set()
    for seed in range(16):
        np.random.seed(seed)
        out = PhotoMetricDistortion(brightness_delta=0, contrast_range=(2.0, 2.0), saturation_range=(1.0, 1.0),
                                    hue_delta=0)({'img': gray.copy()})['img']
        outputs.add(int(out.max()))
        assert (out == out.flat[0]).all()
    assert outputs == {100, 200}
    np.random.seed(0)
    white = PhotoMetricDistortion(brightness_delta=0, contrast_range=(3.0, 3.0), saturation_range=(1.0, 1.0),
                                  hue_delta=0)
    results = [white({'img': gray.copy()})['img'].max() for _ in range(16)]
    assert set(results) == {100, 255}  # 300 clips to 255


# --------------------------------------------------------------------------------------------- packing
def test_pack_dense_inputs_types_and_shapes():
    results = sample(h=5, w=7)
    results.update(img_path='x.jpg', flip=False, unrelated='dropped')
    packed = PackDenseInputs()(results)
    inputs, data_sample = packed['inputs'], packed['data_samples']
    assert inputs.dtype == torch.uint8 and inputs.shape == (3, 5, 7) and inputs.is_contiguous()
    np.testing.assert_array_equal(inputs[0].numpy(), results['img'][..., 0])  # channel 0 is R
    assert isinstance(data_sample, BaseDataElement)
    assert isinstance(data_sample.gt_sem_seg, PixelData) and isinstance(data_sample.gt_depth, PixelData)
    assert data_sample.gt_sem_seg.data.dtype == torch.int64 and data_sample.gt_sem_seg.data.shape == (1, 5, 7)
    assert data_sample.gt_depth.data.dtype == torch.float32 and data_sample.gt_depth.data.shape == (1, 5, 7)
    assert set(data_sample.metainfo) == {'img_path', 'ori_shape', 'img_shape', 'flip'}
    no_gt = PackDenseInputs()({'img': results['img']})['data_samples']
    assert 'gt_sem_seg' not in no_gt and 'gt_depth' not in no_gt


def test_pipeline_from_registry_feeds_the_preprocessor(tmp_path):
    from mmengine.dataset import pseudo_collate

    from heads.models import DensePreprocessor
    pipeline = [TRANSFORMS.build(t) for t in [
        dict(type='RandomResize', scale=(64, 32), ratio_range=(0.5, 1.5)), dict(type='RandomCrop', crop_size=24),
        dict(type='RandomFlip'), dict(type='PhotoMetricDistortion'), dict(type='Pad', size=(24, 24)),
        dict(type='PackDenseInputs')]]
    batch = []
    for seed in range(2):
        results = sample(h=30, w=40, seed=seed)
        for transform in pipeline:
            results = transform(results)
        batch.append(results)
    out = DensePreprocessor(size_divisor=8)(pseudo_collate(batch))
    assert out['inputs'].shape == (2, 3, 24, 24) and out['inputs'].dtype == torch.float32
    assert out['data_samples'][0].gt_sem_seg.data.shape == (1, 24, 24)
    assert out['data_samples'][1].gt_depth.data.shape == (1, 24, 24)
