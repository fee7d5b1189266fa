"""IoUMetric and DepthMetric against values worked out by hand, fed the way mmengine's Evaluator feeds them
(``BaseDataElement.to_dict()`` samples into ``process``, then ``evaluate(size)``)."""
import logging
import math
from pathlib import Path

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.structures import BaseDataElement, PixelData

from heads.evaluation.metrics import DepthMetric, IoUMetric
from heads.registry import METRICS

CLASSES = ('road', 'car', 'sky')


def seg_sample(pred, label, img_path='img.png'):
    s = BaseDataElement(metainfo=dict(img_path=img_path, ori_shape=torch.tensor(label).shape))
    s.pred_sem_seg = PixelData(data=torch.tensor(pred, dtype=torch.int64)[None])   # 1 h w
    s.gt_sem_seg = PixelData(data=torch.tensor(label, dtype=torch.uint8)[None])    # 1 h w
    return s


def depth_sample(pred, gt, img_path='img.png'):
    s = BaseDataElement(metainfo=dict(img_path=img_path))
    s.pred_depth = PixelData(data=torch.as_tensor(pred, dtype=torch.float32).reshape(1, *torch.as_tensor(pred).shape))
    s.gt_depth = PixelData(data=torch.as_tensor(gt, dtype=torch.float32).reshape(1, *torch.as_tensor(gt).shape))
    return s


def run(metric, samples):
    """What mmengine's Evaluator does: process the to_dict() samples, then evaluate."""
    metric.process(None, [s.to_dict() for s in samples])
    return metric.evaluate(size=len(samples))


# ------------------------------------------------------------------------------------------ segmentation
#
# Image A (2x3, classes road=0, car=1, sky=2; 255 = ignore):
#   label  0 0 1      pred  0 1 1
#          1 1 255          0 1 2    <- the 'sky' prediction sits on the ignored pixel: not counted
# Labelled pixels (label, pred): (0,0) (0,1) (1,1) (1,0) (1,1)
#   road: I = 1, pred area 2, label area 2 -> U = 3: IoU 1/3, Acc 1/2
#   car:  I = 2, pred area 3, label area 3 -> U = 4: IoU 1/2, Acc 2/3
#   sky:  in neither -> U = 0, label area 0: IoU and Acc NaN, skipped
#   aAcc = 3/5; mIoU = (1/3 + 1/2)/2 = 5/12; mAcc = (1/2 + 2/3)/2 = 7/12
IMG_A = dict(label=[[0, 0, 1], [1, 1, 255]], pred=[[0, 1, 1], [0, 1, 2]])
# Image B (1x4): all road, all right -> road I = U = 4, label area 4; car and sky absent.
IMG_B = dict(label=[[0, 0, 0, 0]], pred=[[0, 0, 0, 0]])


def test_iou_one_image_by_hand():
    metric = IoUMetric(num_classes=3, print_table=False)
    metric.dataset_meta = dict(classes=CLASSES)
    out = run(metric, [seg_sample(**IMG_A)])
    assert out == {'aAcc': 60.0, 'mIoU': round(100 * 5 / 12, 2), 'mAcc': round(100 * 7 / 12, 2)}
    assert out['mIoU'] == 41.67 and out['mAcc'] == 58.33
    assert [r['class'] for r in metric.per_class] == list(CLASSES)
    assert metric.per_class[0]['IoU'] == 33.33 and metric.per_class[0]['Acc'] == 50.0
    assert metric.per_class[1]['IoU'] == 50.0 and metric.per_class[1]['Acc'] == 66.67
    assert math.isnan(metric.per_class[2]['IoU']) and math.isnan(metric.per_class[2]['Acc'])
    assert metric.results == []  # evaluate resets


def test_iou_accumulates_areas_over_the_set_not_per_image_means():
    metric = IoUMetric(num_classes=3, print_table=False)
    out = run(metric, [seg_sample(**IMG_A), seg_sample(**IMG_B)])
    # over the set: road I = 1+4 = 5, U = 3+4 = 7; car I = 2, U = 4 -> mIoU = (5/7 + 1/2)/2 = 17/28
    # road Acc = 5/6, car Acc = 2/3 -> mAcc = 3/4; aAcc = (3+4)/(5+4) = 7/9
    assert out == {'aAcc': 77.78, 'mIoU': 60.71, 'mAcc': 75.0}
    # the mean of per-image mIoU would be (5/12 + 1)/2 = 17/24 (image B only has road, IoU 1): different
    per_image = [run(IoUMetric(num_classes=3, print_table=False), [seg_sample(**img)])['mIoU']
                 for img in (IMG_A, IMG_B)]
    assert per_image == [41.67, 100.0]
    assert round(100 * 17 / 24, 2) == 70.83 != out['mIoU']


def test_iou_batches_give_the_same_as_one_batch():
    metric = IoUMetric(num_classes=3, print_table=False)
    metric.process(None, [seg_sample(**IMG_A).to_dict()])
    metric.process(None, [seg_sample(**IMG_B).to_dict()])
    assert metric.evaluate(size=2) == {'aAcc': 77.78, 'mIoU': 60.71, 'mAcc': 75.0}


def test_iou_class_names_and_count_from_dataset_meta_and_table_logged():
    metric = IoUMetric()  # num_classes from dataset_meta
    metric.dataset_meta = dict(classes=CLASSES)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        out = run(metric, [seg_sample(**IMG_A)])
    finally:
        logger.removeHandler(handler)
    assert out['mIoU'] == 41.67
    assert [r['class'] for r in metric.per_class] == ['road', 'car', 'sky']
    table = '\n'.join(r.getMessage() for r in records)
    for text in ('road', 'car', 'sky', '33.33', '66.67', 'nan'):
        assert text in table


def test_iou_nan_to_num_counts_absent_classes():
    metric = IoUMetric(num_classes=3, nan_to_num=0, print_table=False)
    out = run(metric, [seg_sample(**IMG_A)])
    # sky now counts as 0: mIoU = (1/3 + 1/2 + 0)/3 = 5/18, mAcc = (1/2 + 2/3 + 0)/3 = 7/18
    assert out == {'aAcc': 60.0, 'mIoU': 27.78, 'mAcc': 38.89}


def test_iou_prefix_and_registry():
    metric = METRICS.build(dict(type='IoUMetric', num_classes=3, prefix='val', print_table=False))
    assert isinstance(metric, IoUMetric)
    assert run(metric, [seg_sample(**IMG_A)]) == {'val/aAcc': 60.0, 'val/mIoU': 41.67, 'val/mAcc': 58.33}
    assert isinstance(METRICS.build(dict(type='DepthMetric')), DepthMetric)


def test_iou_out_of_range_prediction_raises():
    metric = IoUMetric(num_classes=3, print_table=False)
    with pytest.raises(ValueError, match='prediction value 7'):
        metric.process(None, [seg_sample(pred=[[0, 7]], label=[[0, 1]]).to_dict()])
    # but a bad prediction on an ignored pixel is not looked at
    metric.process(None, [seg_sample(pred=[[0, 7]], label=[[0, 255]]).to_dict()])


def test_iou_needs_a_class_count_and_same_sizes():
    with pytest.raises(ValueError, match='num_classes'):
        IoUMetric().process(None, [seg_sample(**IMG_A).to_dict()])
    with pytest.raises(ValueError, match='b.png'):
        IoUMetric(num_classes=3).process(None, [seg_sample([[0, 1]], [[0, 1, 1]], img_path='b.png').to_dict()])


# ------------------------------------------------------------------------------------------------- depth
#
# Hand example (2x2):  gt 1   2     pred 1    2.4     ratio max(p/g, g/p): 1   1.2
#                         4   0.5        3    1                          4/3   2
# d1 (< 1.25): 2/4; d2 (< 1.5625): 3/4; d3 (< 1.953125): 3/4 (2 is above all three)
# |p-g|/g: 0, 0.2, 0.25, 1 -> abs_rel 1.45/4 = 0.3625
# (p-g)^2/g: 0, 0.08, 0.25, 0.5 -> sq_rel 0.83/4 = 0.2075
# (p-g)^2: 0, 0.16, 1, 0.25 -> rmse sqrt(1.41/4)
# log p - log g: 0, ln 1.2, ln 0.75, ln 2
GT = [[1.0, 2.0], [4.0, 0.5]]
PRED = [[1.0, 2.4], [3.0, 1.0]]


def hand_depth_metrics():
    d = [0.0, math.log(1.2), math.log(0.75), math.log(2.0)]
    mean_d2 = sum(x * x for x in d) / 4
    mean_d = sum(d) / 4
    return {'d1': 0.5, 'd2': 0.75, 'd3': 0.75, 'abs_rel': 0.3625, 'sq_rel': 0.2075,
            'rmse': math.sqrt(1.41 / 4), 'rmse_log': math.sqrt(mean_d2),
            'log10': (0 + math.log10(1.2) + math.log10(4 / 3) + math.log10(2)) / 4,
            'silog': 100 * math.sqrt(mean_d2 - mean_d ** 2)}


def assert_metrics(out, expected):
    assert set(out) == set(expected)
    for k, v in expected.items():
        assert out[k] == pytest.approx(v, rel=1e-6, abs=1e-9), k


def test_depth_2x2_by_hand():
    assert_metrics(run(DepthMetric(), [depth_sample(PRED, GT)]), hand_depth_metrics())


def test_depth_invalid_gt_pixels_are_excluded():
    # the same four pixels, plus gt 0, nan, inf and 11 (> max_depth 10) under garbage predictions
    gt = [[1.0, 2.0, 0.0, float('nan')], [4.0, 0.5, 11.0, float('inf')]]
    pred = [[1.0, 2.4, 7.0, 0.1], [3.0, 1.0, 3.0, 9.0]]
    assert_metrics(run(DepthMetric(max_depth=10.0), [depth_sample(pred, gt)]), hand_depth_metrics())
    # a gt of exactly max_depth is valid (min < gt <= max): ratio 10/5 = 2, abs_rel 0.5
    out = run(DepthMetric(max_depth=10.0), [depth_sample([[5.0, 5.0]], [[10.0, 0.0]])])
    assert out['abs_rel'] == pytest.approx(0.5) and out['d3'] == 0.0


def test_depth_mean_over_images_skips_images_without_valid_pixels():
    # image 2: a single pixel, perfect -> every error 0, every delta 1; image 3: no valid pixel (skipped)
    samples = [depth_sample(PRED, GT), depth_sample([[3.0]], [[3.0]]), depth_sample([[3.0]], [[0.0]])]
    expected = {k: (v + (1.0 if k.startswith('d') else 0.0)) / 2 for k, v in hand_depth_metrics().items()}
    assert_metrics(run(DepthMetric(), samples), expected)


def test_depth_no_valid_pixel_at_all_raises():
    metric = DepthMetric()
    metric.process(None, [depth_sample([[1.0]], [[0.0]]).to_dict()])
    with pytest.raises(ValueError, match='no valid ground-truth pixel'):
        metric.evaluate(size=1)


def test_depth_predictions_are_clamped():
    # min 0.5, max 10: pred -3 -> 0.5 against gt 1 (ratio 2, |p-g|/g 0.5);
    #                  pred 100 -> 10 against gt 5 (ratio 2, |p-g|/g 1)
    out = run(DepthMetric(min_depth=0.5, max_depth=10.0), [depth_sample([[-3.0, 100.0]], [[1.0, 5.0]])])
    assert out['d1'] == out['d3'] == 0.0
    assert out['abs_rel'] == pytest.approx(0.75)
    assert out['sq_rel'] == pytest.approx((0.25 / 1 + 25 / 5) / 2)
    assert out['rmse'] == pytest.approx(math.sqrt((0.25 + 25) / 2))
    assert out['rmse_log'] == pytest.approx(math.log(2))
    assert out['silog'] == pytest.approx(100 * math.log(2))  # d = -ln 2, +ln 2: mean 0, mean square ln^2 2


def test_depth_eigen_crop_counts_only_rows_45_471_cols_41_601():
    gt = torch.ones(480, 640)
    pred = torch.full((480, 640), 9.0)       # garbage outside the crop (valid gt there, so it would count)
    pred[45:471, 41:601] = 1.0               # crop: 426 rows x 560 cols
    pred[45:471, 41:321] = 2.0               # its left half (280 cols) off by a factor 2
    out = run(DepthMetric(crop='eigen'), [depth_sample(pred, gt)])
    assert out['d1'] == pytest.approx(0.5) and out['abs_rel'] == pytest.approx(0.5)
    assert out['rmse'] == pytest.approx(math.sqrt(0.5))
    uncropped = run(DepthMetric(), [depth_sample(pred, gt)])
    assert uncropped['d1'] < 0.5
    # other sizes: the same fractions, floored: 240x320 -> rows 22:235, cols 20:300
    mask = DepthMetric(crop='eigen').valid_mask(torch.ones(240, 320))
    expected = torch.zeros(240, 320, dtype=torch.bool)
    expected[22:235, 20:300] = True
    assert torch.equal(mask, expected)


def test_depth_garg_crop_on_a_kitti_size():
    # 375x1242: rows int(153.04):int(371.96) = 153:371, cols int(44.65):int(1197.35) = 44:1197
    mask = DepthMetric(crop='garg', max_depth=80.0).valid_mask(torch.ones(375, 1242))
    expected = torch.zeros(375, 1242, dtype=torch.bool)
    expected[153:371, 44:1197] = True
    assert torch.equal(mask, expected)


def test_depth_size_mismatch_names_the_image_and_sizes():
    metric = DepthMetric()
    with pytest.raises(ValueError, match=r'scene/0001\.png.*\(2, 2\).*\(2, 3\)'):
        metric.process(None, [depth_sample([[1.0, 1.0], [1.0, 1.0]], [[1.0] * 3] * 2, 'scene/0001.png').to_dict()])


def test_depth_prefix_and_bad_crop():
    out = run(DepthMetric(prefix='nyu'), [depth_sample(PRED, GT)])
    assert out['nyu/abs_rel'] == pytest.approx(0.3625)
    with pytest.raises(ValueError, match='crop'):
        DepthMetric(crop='nyu')


# ------------------------------------------------------------------------------------------ depth alignment
#
# Zero-shot relative depth: the prediction is aligned to the ground truth per image on its valid pixels first.
def test_scale_shift_disparity_undoes_an_exact_affine_disparity():
    # gt disparity 1/g = 1, 0.5, 0.25, 2; the prediction is 3 * disparity + 0.7 -> aligned: zero error
    pred = [[3 * 1 + 0.7, 3 * 0.5 + 0.7], [3 * 0.25 + 0.7, 3 * 2 + 0.7]]
    out = run(DepthMetric(alignment='scale_shift_disparity'), [depth_sample(pred, GT)])
    assert out['d1'] == 1.0
    assert out['abs_rel'] == pytest.approx(0, abs=1e-6) and out['rmse'] == pytest.approx(0, abs=1e-6)
    # without alignment the same prediction is far off
    assert run(DepthMetric(), [depth_sample(pred, GT)])['abs_rel'] > 1


# Least squares by hand (2x2): gt 1 0.5 / 0.25 1 -> disparity y = 1, 2, 4, 1; prediction x = 0, 1, 2, 3.
# n = 4, sum x = 6, sum y = 8, sum x^2 = 14, sum xy = 0 + 2 + 8 + 3 = 13; det = 4*14 - 6^2 = 20
# s = (4*13 - 6*8)/20 = 0.2, t = (8 - 0.2*6)/4 = 1.7 -> aligned disparity 1.7, 1.9, 2.1, 2.3, depth its inverse
def test_scale_shift_disparity_2x2_by_hand():
    from heads.evaluation.metrics import fit_scale_shift
    x, y = torch.tensor([0.0, 1, 2, 3], dtype=torch.float64), torch.tensor([1.0, 2, 4, 1], dtype=torch.float64)
    s, t = fit_scale_shift(x, y)
    assert float(s) == pytest.approx(0.2) and float(t) == pytest.approx(1.7)
    gt, p = [1.0, 0.5, 0.25, 1.0], [1 / 1.7, 1 / 1.9, 1 / 2.1, 1 / 2.3]
    sample = depth_sample([[0.0, 1.0], [2.0, 3.0]], [gt[:2], gt[2:]])
    out = run(DepthMetric(alignment='scale_shift_disparity'), [sample])
    assert out['abs_rel'] == pytest.approx(sum(abs(a - b) / b for a, b in zip(p, gt)) / 4)
    assert out['rmse'] == pytest.approx(math.sqrt(sum((a - b) ** 2 for a, b in zip(p, gt)) / 4))
    # a constant prediction has no unique fit: s = 0, t = mean(y) = 2 -> every depth 0.5
    s, t = fit_scale_shift(torch.full((4,), 5.0, dtype=torch.float64), y)
    assert float(s) == 0 and float(t) == 2.0


def test_scale_shift_disparity_clamps_the_aligned_disparity_to_the_depth_range():
    # y = 1, 0.5, 0.25, 0.125 on x = 0..3: s = (4*1.375 - 6*1.875)/20 = -0.2875, t = (1.875 + 0.2875*6)/4 = 0.9
    # -> disparity 0.9, 0.6125, 0.325, 0.0375; the last is below 1/max_depth = 0.1: depth 10, not 26.7
    metric = DepthMetric(alignment='scale_shift_disparity', max_depth=10.0)
    aligned = metric.align(torch.tensor([0.0, 1, 2, 3], dtype=torch.float64),
                           torch.tensor([1.0, 2, 4, 8], dtype=torch.float64))
    assert aligned.tolist() == pytest.approx([1 / 0.9, 1 / 0.6125, 1 / 0.325, 10.0])


# Median scaling by hand: pred 1 2 / 3 10 (median (2+3)/2 = 2.5), gt 2 4 / 6 8 (median (4+6)/2 = 5): scale 2
# -> 2, 4, 6, 20, clamped to max_depth 10: errors 0, 0, 0, 2 -> abs_rel 0.25/4, rmse sqrt(4/4), d1 3/4 (10/8 = 1.25)
def test_median_scaling_by_hand():
    out = run(DepthMetric(alignment='median'), [depth_sample([[1.0, 2.0], [3.0, 10.0]], [[2.0, 4.0], [6.0, 8.0]])])
    assert out['abs_rel'] == pytest.approx(0.0625) and out['rmse'] == pytest.approx(1.0) and out['d1'] == 0.75


@pytest.mark.parametrize('alignment', ['median', 'scale_shift_disparity'])
def test_alignment_ignores_invalid_pixels(alignment):
    # the 2x2 examples plus gt 0, nan and 11 (> max_depth) under garbage predictions: the fit sees the same pixels
    if alignment == 'median':
        pred, gt = [[1.0, 2.0], [3.0, 10.0]], [[2.0, 4.0], [6.0, 8.0]]
    else:
        pred, gt = [[0.0, 1.0], [2.0, 3.0]], [[1.0, 0.5], [0.25, 1.0]]
    padded_pred = [row + [900.0, -7.0, 1e6] for row in pred]
    padded_gt = [row + [0.0, float('nan'), 11.0] for row in gt]
    metric = DepthMetric(alignment=alignment, max_depth=10.0)
    assert run(metric, [depth_sample(padded_pred, padded_gt)]) == pytest.approx(
        run(DepthMetric(alignment=alignment, max_depth=10.0), [depth_sample(pred, gt)]))


def test_alignment_from_a_config_and_cfg_options():
    import argparse

    from mmengine.config import Config, DictAction
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    options = parser.parse_args(['--cfg-options', 'val_evaluator.alignment=scale_shift_disparity']).cfg_options
    root = Path(__file__).resolve().parents[2]
    cfg = Config.fromfile(str(root / 'configs' / '_base_' / 'datasets' / 'seven_scenes.py'))
    cfg.merge_from_dict(options)
    assert METRICS.build(cfg.val_evaluator).alignment == 'scale_shift_disparity'
    assert METRICS.build(dict(type='DepthMetric', alignment='median')).alignment == 'median'
    with pytest.raises(ValueError, match='alignment'):
        DepthMetric(alignment='least_squares')
