"""Panoptic quality (PQ), segmentation quality (SQ) and recognition quality (RQ) as panopticapi's ``pq_compute``
defines them (Kirillov et al., CVPR 2019), on the packed panoptic maps of :mod:`heads.io.labels`.

Per image, a predicted and a ground-truth segment of the same class match when their IoU > 0.5, the union leaving
out the prediction's pixels on void ground truth. Per class c over the whole set: TP_c matches with IoU sum S_c,
FN_c unmatched non-crowd ground truth, FP_c unmatched predictions, except those lying more than half on void and on
the crowd region of their own class. Then ``PQ_c = S_c / (TP_c + FP_c / 2 + FN_c / 2)``, ``SQ_c = S_c / TP_c``
(0 without TP), ``RQ_c = TP_c / (TP_c + FP_c / 2 + FN_c / 2)``, and PQ / SQ / RQ are their means over the classes
with TP_c + FP_c + FN_c > 0 (all, things, stuff).

Differences from panopticapi, none of which changes a COCO result: segment areas are counted in the maps (its
ground truth areas come from the JSON, which COCO computes the same way); all crowd pixels of a class form one
region (panopticapi keeps the last crowd segment of each class; COCO has at most one); a group without classes gives
NaN (panopticapi divides by zero).
"""
from __future__ import annotations

import numpy as np
import torch
from mmengine.evaluator import BaseMetric

from ..io.labels import INSTANCE_OFFSET
from ..registry import METRICS
from .classes import metric_num_classes, thing_indices

#: Per-class statistics columns.
TP, FP, FN, IOU = range(4)


def _as_hw(data, name: str) -> np.ndarray:
    array = data.detach().cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)
    if array.ndim == 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 2:
        raise ValueError(f"{name} must be '1 h w' or 'h w', got shape {array.shape}")
    return array.astype(np.int64)


def _check_values(panoptic: np.ndarray, num_classes: int, name: str) -> None:
    values = np.unique(panoptic)
    bad = values[(values < 0) | ((values % INSTANCE_OFFSET >= num_classes) & (values != num_classes))]
    if bad.size:
        raise ValueError(f"{name} has values {bad[:5].tolist()} that are neither label + instance * "
                         f"{INSTANCE_OFFSET} with a label in 0..{num_classes - 1} nor void ({num_classes})")


def pq_stats(pred, gt, num_classes: int, crowd=None) -> np.ndarray:
    """One image's 'c 4' statistics (TP, FP, FN, IoU sum per class; module docstring).

    ``pred`` and ``gt``: panoptic maps ('1 h w' or 'h w', ``label + instance * INSTANCE_OFFSET``, ``num_classes`` =
    void); every distinct value is one segment. ``crowd``: the class of the crowd region on its pixels and
    ``num_classes`` elsewhere (``gt_panoptic_seg.crowd`` of :func:`heads.transforms.panoptic_targets`), or None.
    """
    pred, gt = _as_hw(pred, 'prediction'), _as_hw(gt, 'ground truth')
    if pred.shape != gt.shape:
        raise ValueError(f"prediction {pred.shape} and ground truth {gt.shape} differ in size")
    _check_values(pred, num_classes, 'the predicted panoptic map')
    _check_values(gt, num_classes, 'the ground-truth panoptic map')
    void = num_classes
    if crowd is not None:  # crowd region of class c -> key -(c + 1), apart from every segment and from void
        crowd = _as_hw(crowd, 'crowd map')
        gt = np.where(crowd != void, -(crowd + 1), gt)
    gt_ids, gt_index = np.unique(gt, return_inverse=True)
    pred_ids, pred_index = np.unique(pred, return_inverse=True)
    joint = np.bincount(gt_index.ravel() * len(pred_ids) + pred_index.ravel(),
                        minlength=len(gt_ids) * len(pred_ids)).reshape(len(gt_ids), len(pred_ids))  # intersections
    gt_area, pred_area = joint.sum(1), joint.sum(0)
    gt_void = np.flatnonzero(gt_ids == void)
    on_void = joint[gt_void[0]] if gt_void.size else np.zeros(len(pred_ids), np.int64)  # per prediction
    stats = np.zeros((num_classes, 4))
    gt_matched, pred_matched = set(), set()
    for g, gt_id in enumerate(gt_ids):
        if gt_id == void or gt_id < 0:  # crowd never matches
            continue
        for p in np.flatnonzero(joint[g]):
            if pred_ids[p] == void or pred_ids[p] % INSTANCE_OFFSET != gt_id % INSTANCE_OFFSET:
                continue
            iou = joint[g, p] / (pred_area[p] + gt_area[g] - joint[g, p] - on_void[p])
            if iou > 0.5:
                stats[gt_id % INSTANCE_OFFSET, TP] += 1
                stats[gt_id % INSTANCE_OFFSET, IOU] += iou
                gt_matched.add(g)
                pred_matched.add(p)
    for g, gt_id in enumerate(gt_ids):
        if gt_id != void and gt_id >= 0 and g not in gt_matched:
            stats[gt_id % INSTANCE_OFFSET, FN] += 1
    crowd_of = {-gt_id - 1: g for g, gt_id in enumerate(gt_ids) if gt_id < 0}  # class -> its crowd region
    for p, pred_id in enumerate(pred_ids):
        if pred_id == void or p in pred_matched:
            continue
        label = pred_id % INSTANCE_OFFSET
        ignored = on_void[p] + (joint[crowd_of[label], p] if label in crowd_of else 0)
        if ignored / pred_area[p] <= 0.5:
            stats[label, FP] += 1
    return stats


def pq_average(stats: np.ndarray, classes) -> dict:
    """``{'PQ', 'SQ', 'RQ'}`` (fractions) averaged over those of ``classes`` (indices) with TP + FP + FN > 0, and
    'n', their count; NaN when there are none."""
    stats = stats[list(classes)]
    tp, fp, fn, iou = stats.T
    present = tp + fp + fn > 0
    if not present.any():
        return dict(PQ=float('nan'), SQ=float('nan'), RQ=float('nan'), n=0)
    tp, fp, fn, iou = tp[present], fp[present], fn[present], iou[present]
    denominator = tp + 0.5 * fp + 0.5 * fn
    sq = np.divide(iou, tp, out=np.zeros_like(iou), where=tp > 0)
    return dict(PQ=float(np.mean(iou / denominator)), SQ=float(np.mean(sq)), RQ=float(np.mean(tp / denominator)),
                n=int(present.sum()))


@METRICS.register_module()
class PanopticQualityMetric(BaseMetric):
    """PQ, SQ, RQ (percent; module docstring) of ``pred_panoptic_seg`` against ``gt_panoptic_seg`` (and its 'crowd'
    map when present), with ``_th`` / ``_st`` over the thing / stuff classes when the thing classes are known
    (``thing_classes`` names, default the dataset's metainfo 'thing_classes'). ``num_classes`` defaults to the number
    of the dataset's classes. After ``compute_metrics``, ``self.per_class`` lists each class's PQ, SQ, RQ, TP, FP, FN.
    """
    default_prefix = ''

    def __init__(self, num_classes: int | None = None, thing_classes=None, **kwargs):
        super().__init__(**kwargs)
        self.num_classes, self.thing_classes, self.per_class = num_classes, thing_classes, []

    def _num_classes(self) -> int:
        return metric_num_classes(self.num_classes, self.dataset_meta, 'PanopticQualityMetric')

    def process(self, data_batch, data_samples) -> None:
        for sample in data_samples:
            for key in ('pred_panoptic_seg', 'gt_panoptic_seg'):
                if key not in sample:
                    raise KeyError(f"PanopticQualityMetric needs {key!r} in each sample; "
                                   f"{sample.get('img_path', 'a sample')} has {sorted(sample)}")
            gt = sample['gt_panoptic_seg']
            self.results.append(pq_stats(sample['pred_panoptic_seg']['data'], gt['data'], self._num_classes(),
                                         gt.get('crowd')))

    def compute_metrics(self, results: list) -> dict:
        num_classes = self._num_classes()
        stats = np.sum(results, axis=0) if results else np.zeros((num_classes, 4))
        groups = {'': range(num_classes)}
        things = thing_indices(self.thing_classes, self.dataset_meta)
        if things is not None:
            groups.update(_th=things, _st=[c for c in range(num_classes) if c not in set(things)])
        metrics = {}
        for suffix, classes in groups.items():
            average = pq_average(stats, classes)
            metrics.update({f'{name}{suffix}': 100 * average[name] for name in ('PQ', 'SQ', 'RQ')})
        names = list((self.dataset_meta or {}).get('classes') or range(num_classes))
        self.per_class = [dict(**{'class': names[c]}, TP=int(stats[c, TP]), FP=int(stats[c, FP]), FN=int(stats[c, FN]),
                               **{k: 100 * v for k, v in pq_average(stats, [c]).items() if k != 'n'})
                          for c in range(num_classes)]
        return metrics
