"""COCO detection metrics (pycocotools COCOeval) for :class:`~heads.models.TorchvisionDetector` predictions."""
from __future__ import annotations

import contextlib
import io

import numpy as np
from mmengine.evaluator import BaseMetric
from pycocotools.cocoeval import COCOeval

from ..datasets.coco import encode_mask, load_coco
from ..registry import METRICS

STAT_NAMES = ('mAP', 'mAP_50', 'mAP_75', 'mAP_s', 'mAP_m', 'mAP_l')  # COCOeval.stats[0:6]


def coco_results(prediction: dict, with_masks: bool) -> list[dict]:
    """One image's detections as COCO results: ``prediction`` is a predicted sample as mmengine's Evaluator passes
    it (``BaseDataElement.to_dict()``: image_id, boxes xyxy, scores, labels = category ids[, masks 'n 1 h w'])."""
    boxes = prediction['boxes'].detach().cpu().numpy()
    results = [{'image_id': int(prediction['image_id']), 'category_id': int(label), 'score': float(score),
                'bbox': [float(x0), float(y0), float(x1 - x0), float(y1 - y0)]}
               for (x0, y0, x1, y1), score, label in zip(boxes, prediction['scores'].tolist(),
                                                         prediction['labels'].tolist())]
    if with_masks:
        for result, mask in zip(results, prediction['masks'][:, 0].detach().cpu().numpy() > 0.5):
            result['segmentation'] = encode_mask(mask)
    return results


@METRICS.register_module()
class CocoDetectionMetric(BaseMetric):
    """COCO AP of boxes ('bbox') and, for Mask R-CNN, masks ('segm') against ``ann_file`` (default: the evaluated
    dataset's, from its metainfo, so ``--data-root`` moves it too): logs
    ``{iou_type}_mAP``, ``_mAP_50``, ``_mAP_75``, ``_mAP_s/m/l`` (fractions in [0, 1], as COCOeval prints them)."""
    default_prefix = 'coco'

    def __init__(self, ann_file: str | None = None, iou_types=('bbox',), **kwargs):
        super().__init__(**kwargs)
        unknown = set(iou_types) - {'bbox', 'segm'}
        if unknown:
            raise ValueError(f"iou_types must be among 'bbox', 'segm'; got {sorted(unknown)}")
        self.ann_file, self.iou_types = ann_file, tuple(iou_types)

    def process(self, data_batch, data_samples) -> None:
        for prediction in data_samples:
            self.results.extend(coco_results(prediction, 'segm' in self.iou_types))

    def compute_metrics(self, results: list) -> dict:
        ground_truth = load_coco(self.ann_file or self.dataset_meta['ann_file'])
        metrics = {}
        for iou_type in self.iou_types:
            metrics.update(coco_average_precision(ground_truth, results, iou_type))
        return metrics


def coco_average_precision(ground_truth, results: list[dict], iou_type: str, cat_ids=None) -> dict:
    """``{iou_type}_mAP``, ``_mAP_50``, ``_mAP_75``, ``_mAP_s/m/l`` of COCO ``results`` against the COCO index
    ``ground_truth`` (COCOeval; fractions in [0, 1], 0 where COCOeval gives -1), over ``cat_ids`` (default all)."""
    stats = np.zeros(len(STAT_NAMES))
    if results:  # COCO.loadRes refuses an empty list
        with contextlib.redirect_stdout(io.StringIO()):
            evaluation = COCOeval(ground_truth, ground_truth.loadRes(results), iou_type)
            if cat_ids is not None:
                evaluation.params.catIds = list(cat_ids)
            evaluation.evaluate()
            evaluation.accumulate()
            evaluation.summarize()
        stats = np.maximum(evaluation.stats[:len(STAT_NAMES)], 0)  # -1 = no ground truth of that size
    return {f'{iou_type}_{name}': float(value) for name, value in zip(STAT_NAMES, stats)}
