"""Metrics for mmengine's evaluators: IoU (segmentation), depth errors and accuracies, top-k accuracy, and COCO box
and mask average precision through pycocotools."""
from .coco import CocoDetectionMetric
from .metrics import AccuracyMetric, DepthMetric, IoUMetric

__all__ = ['AccuracyMetric', 'CocoDetectionMetric', 'DepthMetric', 'IoUMetric']
