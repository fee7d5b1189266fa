"""COCO mask AP (pycocotools' COCOeval, iouType 'segm') of a mask head's instance predictions against the samples'
own ground truth, with no annotation file: each image's ``gt_instances`` become the ground truth and the crowd
regions of its ``gt_panoptic_seg`` (when present) crowd annotations, which COCOeval lets predictions hit unpunished.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from ..datasets.coco import encode_mask
from ..registry import METRICS
from .classes import metric_num_classes, thing_indices
from .coco import coco_average_precision


def _numpy(value) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _masks(value, name: str, shape=None) -> np.ndarray:
    """'n h w' bool masks as they are; other dtypes are probabilities, the mask where > 0.5."""
    masks = _numpy(value)
    if masks.ndim != 3 or (shape is not None and masks.shape[1:] != tuple(shape)):
        raise ValueError(f"{name} masks must be 'n h w'" + (f" with h w = {tuple(shape)}" if shape else '') +
                         f", got shape {masks.shape}")
    return masks if masks.dtype == bool else masks > 0.5


def image_annotations(sample: dict, num_classes: int) -> dict:
    """One evaluated sample (as mmengine passes it, ``to_dict()``) -> its size, ground-truth annotations and
    detections, masks RLE-encoded (category id = label + 1; the image id is given later). Crowd regions: the
    classes of ``gt_panoptic_seg['crowd']`` other than ``num_classes`` (its 'nothing' value)."""
    for key in ('gt_instances', 'pred_instances'):
        if key not in sample:
            raise KeyError(f"MaskAPMetric needs {key!r} in each sample; {sample.get('img_path', 'a sample')} has "
                           f"{sorted(sample)}")
    gt, pred = sample['gt_instances'], sample['pred_instances']
    panoptic = sample.get('gt_panoptic_seg') or {}
    gt_masks = _masks(gt['masks'], 'gt_instances')
    if gt_masks.shape[0]:
        shape = gt_masks.shape[1:]
    elif 'data' in panoptic:
        shape = _numpy(panoptic['data']).shape[-2:]
    else:
        shape = _masks(pred['masks'], 'pred_instances').shape[1:]
    pred_masks = _masks(pred['masks'], 'pred_instances', shape)
    anns = [dict(category_id=int(label) + 1, iscrowd=0, segmentation=encode_mask(mask), area=float(mask.sum()))
            for label, mask in zip(_numpy(gt['labels']).tolist(), gt_masks)]
    if panoptic.get('crowd') is not None:
        crowd = _numpy(panoptic['crowd']).reshape(shape)
        for label in np.unique(crowd[crowd != num_classes]).tolist():
            mask = crowd == label
            anns.append(dict(category_id=label + 1, iscrowd=1, segmentation=encode_mask(mask), area=float(mask.sum())))
    detections = [dict(category_id=int(label) + 1, score=float(score), segmentation=encode_mask(mask))
                  for label, score, mask in zip(_numpy(pred['labels']).tolist(), _numpy(pred['scores']).tolist(),
                                                pred_masks)]
    return dict(height=int(shape[0]), width=int(shape[1]), anns=anns, detections=detections)


def coco_index(images: list[dict], num_classes: int) -> tuple[COCO, list[dict]]:
    """The COCO ground-truth index of :func:`image_annotations` entries (image ids 1, 2, ...) and the detections
    as COCO results."""
    dataset = dict(images=[], annotations=[], categories=[dict(id=c + 1, name=str(c)) for c in range(num_classes)])
    results = []
    for image_id, image in enumerate(images, start=1):
        dataset['images'].append(dict(id=image_id, height=image['height'], width=image['width']))
        for ann in image['anns']:
            x, y, w, h = mask_box(ann['segmentation'])
            dataset['annotations'].append(dict(ann, id=len(dataset['annotations']) + 1, image_id=image_id,
                                               bbox=[x, y, w, h]))
        results.extend(dict(det, image_id=image_id) for det in image['detections'])
    ground_truth = COCO()
    ground_truth.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        ground_truth.createIndex()
    return ground_truth, results


def mask_box(rle: dict) -> list[float]:
    """[x, y, w, h] of an RLE mask (pycocotools)."""
    return [float(v) for v in mask_utils.toBbox(dict(rle, counts=rle['counts'].encode('ascii')))]


@METRICS.register_module()
class MaskAPMetric(BaseMetric):
    """COCO mask AP (module docstring) of ``pred_instances`` (masks 'n h w' bool or probabilities, labels, scores)
    against ``gt_instances`` (masks, labels): logs ``segm_mAP``, ``_mAP_50``, ``_mAP_75``, ``_mAP_s/m/l`` (fractions
    in [0, 1], as COCOeval prints them), over the thing classes (``thing_classes`` names or indices, default the
    dataset's metainfo 'thing_classes'; all classes when neither is known), so that the stuff segments a panoptic
    set puts in ``gt_instances`` are left out. ``num_classes`` defaults to the dataset's."""
    default_prefix = ''

    def __init__(self, num_classes: int | None = None, thing_classes=None, **kwargs):
        super().__init__(**kwargs)
        self.num_classes, self.thing_classes = num_classes, thing_classes

    def _num_classes(self) -> int:
        return metric_num_classes(self.num_classes, self.dataset_meta, 'MaskAPMetric')

    def process(self, data_batch, data_samples) -> None:
        for sample in data_samples:
            self.results.append(image_annotations(sample, self._num_classes()))

    def _category_ids(self, num_classes: int) -> list[int]:
        things = thing_indices(self.thing_classes, self.dataset_meta)
        return [c + 1 for c in (range(num_classes) if things is None else things)]

    def compute_metrics(self, results: list) -> dict:
        num_classes = self._num_classes()
        ground_truth, detections = coco_index(results, num_classes)
        return coco_average_precision(ground_truth, detections, 'segm', self._category_ids(num_classes))
