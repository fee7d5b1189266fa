"""Metrics for mmengine's evaluators: IoU (segmentation), depth errors and accuracies, top-k accuracy, COCO box
and mask average precision through pycocotools (with an annotation file, or from the samples' own instances), and
panoptic quality (PQ / SQ / RQ); and, as a plain function, Video Depth Anything's temporal alignment error of a
depth video with known camera poses (:func:`temporal_alignment_error`, :mod:`.tae`)."""
from .coco import CocoDetectionMetric
from .mask_ap import MaskAPMetric
from .metrics import AccuracyMetric, DepthMetric, IoUMetric
from .panoptic import PanopticQualityMetric
from .tae import temporal_alignment_error

__all__ = ['AccuracyMetric', 'CocoDetectionMetric', 'DepthMetric', 'IoUMetric', 'MaskAPMetric',
           'PanopticQualityMetric', 'temporal_alignment_error']
