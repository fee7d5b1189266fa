"""Mask AP through pycocotools on hand-made instances whose AP is known.

COCOeval interpolates precision at the 101 recall points 0, 0.01, ..., 1 (precision at r = the best precision at
recall >= r, 0 past the last recall reached). All masks here are exact copies or disjoint, so every IoU threshold
gives the same AP, and mAP equals it."""
import pytest
import torch

from heads.evaluation.mask_ap import MaskAPMetric

ROAD, CAR, PERSON = 0, 1, 2
META = dict(classes=('road', 'car', 'person'), thing_classes=('car', 'person'))


def box_mask(y0, x0, y1, x1, shape=(40, 40)) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[y0:y1, x0:x1] = True
    return mask


CARS = [box_mask(0, 0, 10, 10), box_mask(20, 20, 30, 35)]
PERSONS = [box_mask(0, 25, 15, 30)]
CROWD_CAR = box_mask(32, 0, 40, 12)


def sample(pred: list[tuple[int, float, torch.Tensor]], with_crowd: bool = True) -> dict:
    """Ground truth: two cars, a person and a car crowd region; ``pred``: (label, score, mask) triples."""
    masks = CARS + PERSONS
    out = {'gt_instances': {'labels': torch.tensor([CAR, CAR, PERSON]), 'masks': torch.stack(masks)},
           'pred_instances': {'labels': torch.tensor([p[0] for p in pred], dtype=torch.int64),
                              'scores': torch.tensor([p[1] for p in pred]),
                              'masks': torch.stack([p[2] for p in pred]) if pred else
                              torch.zeros(0, 40, 40, dtype=torch.bool)}}
    if with_crowd:
        crowd = torch.full((1, 40, 40), 3)
        crowd[0][CROWD_CAR] = CAR
        out['gt_panoptic_seg'] = {'data': torch.full((1, 40, 40), 3), 'crowd': crowd}
    return out


def mask_ap(*samples) -> dict:
    metric = MaskAPMetric()
    metric.dataset_meta = META
    metric.process({}, list(samples))
    return metric.compute_metrics(metric.results)


PERFECT = [(CAR, 0.9, CARS[0]), (CAR, 0.8, CARS[1]), (PERSON, 0.7, PERSONS[0])]


def test_perfect_predictions_give_ap_one():
    metrics = mask_ap(sample(PERFECT), sample(PERFECT))
    assert metrics['segm_mAP'] == pytest.approx(1.0)
    assert metrics['segm_mAP_50'] == metrics['segm_mAP_75'] == pytest.approx(1.0)


def test_a_missing_instance_halves_the_recall():
    # car: one of two found -> precision 1 up to recall 0.5 (51 of 101 points), 0 beyond; person: 1
    metrics = mask_ap(sample([PERFECT[0], PERFECT[2]]))
    assert metrics['segm_mAP'] == pytest.approx((51 / 101 + 1) / 2)


def test_a_false_positive_ranked_first():
    # car detections by score: FP, TP, TP -> precision 0, 1/2, 2/3 at recall 0, 1/2, 1; interpolated 2/3 everywhere
    wrong = (CAR, 0.95, box_mask(12, 0, 18, 10))
    metrics = mask_ap(sample([wrong, *PERFECT]))
    assert metrics['segm_mAP'] == pytest.approx((2 / 3 + 1) / 2)
    # ranked last it costs nothing: precision is 1 until recall 1
    assert mask_ap(sample([*PERFECT, (CAR, 0.1, wrong[2])]))['segm_mAP'] == pytest.approx(1.0)


def test_a_prediction_on_a_crowd_region_is_not_a_false_positive():
    on_crowd = (CAR, 0.95, CROWD_CAR)
    assert mask_ap(sample([on_crowd, *PERFECT]))['segm_mAP'] == pytest.approx(1.0)
    # without the crowd region it is an ordinary top-ranked false positive
    assert mask_ap(sample([on_crowd, *PERFECT], with_crowd=False))['segm_mAP'] == pytest.approx((2 / 3 + 1) / 2)


def test_only_thing_classes_are_averaged():
    road = (ROAD, 0.99, box_mask(10, 10, 20, 20))  # a stuff prediction without ground truth: not evaluated
    assert mask_ap(sample([road, *PERFECT]))['segm_mAP'] == pytest.approx(1.0)
    with_stuff = sample(PERFECT)  # gt_instances of a panoptic set hold stuff segments too: not evaluated
    gt = with_stuff['gt_instances']
    gt['labels'], gt['masks'] = torch.cat([gt['labels'], torch.tensor([ROAD])]), torch.cat([gt['masks'], road[2][None]])
    assert mask_ap(with_stuff)['segm_mAP'] == pytest.approx(1.0)
    everything = MaskAPMetric(num_classes=3, thing_classes=[ROAD, CAR, PERSON])  # road: a class never found, AP 0
    everything.process({}, [with_stuff])
    assert everything.compute_metrics(everything.results)['segm_mAP'] == pytest.approx(2 / 3)
    metric = MaskAPMetric(num_classes=3, thing_classes=['car'])
    metric.dataset_meta = META
    metric.process({}, [sample([PERFECT[0], PERFECT[2]])])  # person found, one car of two
    assert metric.compute_metrics(metric.results)['segm_mAP'] == pytest.approx(51 / 101)


def test_probabilities_are_thresholded_and_sizes_checked():
    soft = [(label, score, mask.float() * 0.8 + 0.1) for label, score, mask in PERFECT]  # 0.9 inside, 0.1 outside
    assert mask_ap(sample(soft))['segm_mAP'] == pytest.approx(1.0)
    bad = sample(PERFECT)
    bad['pred_instances']['masks'] = bad['pred_instances']['masks'][:, :20]
    with pytest.raises(ValueError, match="h w = \\(40, 40\\)"):
        mask_ap(bad)
    with pytest.raises(KeyError, match='pred_instances'):
        MaskAPMetric(num_classes=3).process({}, [{'gt_instances': {}}])


def test_no_predictions_give_zero():
    assert mask_ap(sample([]))['segm_mAP'] == 0.0
    # every instance here is small (< 32^2 px): COCOeval's area ranges see the ground truth's areas
    metrics = mask_ap(sample(PERFECT))
    assert (metrics['segm_mAP_s'], metrics['segm_mAP_m'], metrics['segm_mAP_l']) == (1.0, 0.0, 0.0)
