"""PQ / SQ / RQ on hand-made maps, each expected number worked out by hand from panopticapi's definition
(heads/evaluation/panoptic.py's docstring). Maps are one-pixel-high strips, so the areas can be read off."""
import numpy as np
import pytest
import torch

from heads.evaluation.panoptic import PanopticQualityMetric, pq_stats
from heads.io.labels import INSTANCE_OFFSET as K

ROAD, CAR, PERSON, VOID = 0, 1, 2, 3  # road is stuff, car and person are things; void = num_classes
META = dict(classes=('road', 'car', 'person'), thing_classes=('car', 'person'))


def strip(*runs) -> torch.Tensor:
    """'1 1 w' from (value, length) runs."""
    return torch.tensor(np.concatenate([[v] * n for v, n in runs]), dtype=torch.int64)[None, None]


def sample(pred, gt, crowd=None) -> dict:
    gt_seg = {'data': gt} if crowd is None else {'data': gt, 'crowd': crowd}
    return {'pred_panoptic_seg': {'data': pred}, 'gt_panoptic_seg': gt_seg}


def evaluate(*samples) -> tuple[dict, PanopticQualityMetric]:
    metric = PanopticQualityMetric()
    metric.dataset_meta = META
    metric.process({}, list(samples))
    return metric.compute_metrics(metric.results), metric


def test_perfect_prediction_scores_100():
    gt = strip((ROAD, 5), (CAR, 3), (CAR + K, 3), (VOID, 2), (PERSON, 4))
    metrics, _ = evaluate(sample(gt.clone(), gt))
    assert all(value == pytest.approx(100.0) for value in metrics.values())


def test_matching_false_negative_false_positive_and_void():
    # ground truth: road 8 px, car#0 4, car#1 4, void 2, person 2
    gt = strip((ROAD, 8), (CAR, 4), (CAR + K, 4), (VOID, 2), (PERSON, 2))
    # prediction: road 6, car A 4 (2 on road, 2 on car#0), car B 6 (2 on car#0, 4 on car#1), person 4 (2 on void)
    pred = strip((ROAD, 6), (CAR, 4), (CAR + K, 6), (PERSON, 4))
    # road: IoU 6 / 8 = 0.75 -> TP. car#0: IoU 2/6 with A, 2/8 with B -> FN. car#1 with B: 4 / (6 + 4 - 4) = 2/3 -> TP.
    # person: union leaves out the prediction's 2 void pixels: 2 / (4 + 2 - 2 - 2) = 1 -> TP. car A unmatched -> FP.
    stats = pq_stats(pred, gt, 3)
    np.testing.assert_allclose(stats, [[1, 0, 0, 0.75], [1, 1, 1, 2 / 3], [1, 0, 0, 1.0]])
    pq = {ROAD: 0.75, CAR: (2 / 3) / (1 + 0.5 + 0.5), PERSON: 1.0}
    sq = {ROAD: 0.75, CAR: 2 / 3, PERSON: 1.0}
    rq = {ROAD: 1.0, CAR: 1 / (1 + 0.5 + 0.5), PERSON: 1.0}
    metrics, metric = evaluate(sample(pred, gt))
    for name, per_class in (('PQ', pq), ('SQ', sq), ('RQ', rq)):
        assert metrics[name] == pytest.approx(100 * sum(per_class.values()) / 3)
        assert metrics[f'{name}_th'] == pytest.approx(100 * (per_class[CAR] + per_class[PERSON]) / 2)
        assert metrics[f'{name}_st'] == pytest.approx(100 * per_class[ROAD])
    assert metric.per_class[CAR] == dict({'class': 'car'}, TP=1, FP=1, FN=1, PQ=pytest.approx(100 / 3),
                                         SQ=pytest.approx(200 / 3), RQ=pytest.approx(50.0))


def test_predictions_on_void_and_own_class_crowd_are_not_false_positives():
    # ground truth: crowd car 6 px (void in 'data', car in 'crowd'), void 2, road 6
    gt = strip((VOID, 8), (ROAD, 6))
    crowd = strip((CAR, 6), (VOID, 8))
    # prediction: car 3 px on the car crowd (ignored), person 3 px on the car crowd (another class's crowd: FP),
    # car 2 px on void (ignored), road 6 (TP, IoU 1)
    pred = strip((CAR, 3), (PERSON, 3), (CAR + K, 2), (ROAD, 6))
    np.testing.assert_allclose(pq_stats(pred, gt, 3, crowd), [[1, 0, 0, 1.0], [0, 0, 0, 0], [0, 1, 0, 0]])
    metrics, _ = evaluate(sample(pred, gt, crowd))
    # car has no TP, FP or FN: left out of the means. road 1, person 0.
    assert (metrics['PQ'], metrics['PQ_th'], metrics['PQ_st']) == pytest.approx((50.0, 0.0, 100.0))
    assert (metrics['SQ'], metrics['RQ']) == pytest.approx((50.0, 50.0))


def test_exactly_half_on_void_is_a_false_positive():
    gt = strip((VOID, 2), (ROAD, 4))
    pred = strip((CAR, 4), (ROAD, 2))  # car: 2 of 4 px on void, not more than half -> FP
    np.testing.assert_allclose(pq_stats(pred, gt, 3)[CAR], [0, 1, 0, 0])


def test_crowd_pixels_count_in_the_union_of_a_match():
    # car instance 4 px beside a car crowd region 4 px; the car prediction covers both (8 px)
    gt, crowd = strip((CAR, 4), (VOID, 4)), strip((VOID, 4), (CAR, 4))
    pred = strip((CAR, 8))
    # IoU = 4 / (8 + 4 - 4) = 0.5, not > 0.5: FN; unmatched prediction with 4 / 8 on crowd, not > 0.5: FP.
    # (Were crowd void, the union would drop to 4 and the pair match with IoU 1.)
    np.testing.assert_allclose(pq_stats(pred, gt, 3, crowd)[CAR], [0, 1, 1, 0])


def test_statistics_are_summed_over_images_before_the_class_means():
    gt = strip((CAR, 6), (ROAD, 4))
    hit = strip((CAR, 5), (ROAD, 5))  # car IoU 5/6 -> TP; road IoU 4/5 -> TP
    miss = strip((ROAD, 10))  # car -> FN; road IoU 4/10 -> FN and FP
    metrics, _ = evaluate(sample(hit, gt), sample(miss, gt))
    car = (5 / 6) / (1 + 0.5 * 1)  # TP 1, FN 1 over the set
    road = (4 / 5) / (1 + 0.5 * 1 + 0.5 * 1)  # TP 1, FP 1, FN 1
    assert metrics['PQ'] == pytest.approx(100 * (car + road) / 2)
    assert metrics['SQ'] == pytest.approx(100 * (5 / 6 + 4 / 5) / 2)


def test_a_group_without_classes_is_nan_and_no_thing_classes_gives_no_split():
    gt = strip((ROAD, 4))
    metrics, _ = evaluate(sample(gt.clone(), gt))
    assert metrics['PQ_st'] == 100.0 and np.isnan(metrics['PQ_th'])
    metric = PanopticQualityMetric(num_classes=3)
    metric.process({}, [sample(gt.clone(), gt)])
    assert set(metric.compute_metrics(metric.results)) == {'PQ', 'SQ', 'RQ'}


def test_bad_maps_are_refused_with_their_values():
    gt = strip((ROAD, 4))
    with pytest.raises(ValueError, match=r'values \[5\]'):
        pq_stats(strip((5, 4)), gt, 3)
    with pytest.raises(ValueError, match='differ in size'):
        pq_stats(strip((ROAD, 5)), gt, 3)
    with pytest.raises(KeyError, match='pred_panoptic_seg'):
        PanopticQualityMetric(num_classes=3).process({}, [{'gt_panoptic_seg': {'data': gt}}])


def test_thing_classes_are_read_as_mask_ap_reads_them():
    """Indices and names of the dataset's classes may mix, as MaskAPMetric takes them (one reading for both:
    heads.evaluation.classes.thing_indices); a mixed list was refused, naming its indices as unknown classes."""
    gt = strip((ROAD, 5), (CAR, 3), (CAR + K, 3), (PERSON, 4))
    pred = strip((ROAD, 6), (CAR, 2), (CAR + K, 3), (PERSON, 4))
    results = {}
    for things in (('car', 'person'), [CAR, 'person'], [CAR, PERSON]):
        metric = PanopticQualityMetric(thing_classes=things)
        metric.dataset_meta = META
        metric.process({}, [sample(pred.clone(), gt)])
        results[str(things)] = metric.compute_metrics(metric.results)
    first, *others = results.values()
    assert 'PQ_th' in first and all(other == first for other in others)
    metric = PanopticQualityMetric(thing_classes=['bus'])
    metric.dataset_meta = META
    with pytest.raises(ValueError, match=r"thing classes \['bus'\] are not among the dataset's classes"):
        metric.compute_metrics([])
