"""Metrics for mmengine's evaluators: IoU (segmentation), depth errors and accuracies, top-k accuracy, COCO box
and mask average precision through pycocotools (with an annotation file, or from the samples' own instances), and
panoptic quality (PQ / SQ / RQ)."""
from .coco import CocoDetectionMetric
from .mask_ap import MaskAPMetric
from .metrics import AccuracyMetric, DepthMetric, IoUMetric
from .panoptic import PanopticQualityMetric

__all__ = ['AccuracyMetric', 'CocoDetectionMetric', 'DepthMetric', 'IoUMetric', 'MaskAPMetric',
           'PanopticQualityMetric']
