"""Data transforms with mmseg semantics (no mmcv): loading, geometric and photometric augmentation, packing.

Importing this package registers every transform in :data:`heads.registry.TRANSFORMS`. A training pipeline::

    [dict(type='LoadImage'), dict(type='LoadAnnotations'),
     dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0)),
     dict(type='RandomCrop', crop_size=(512, 512), cat_max_ratio=0.75), dict(type='RandomFlip', prob=0.5),
     dict(type='PhotoMetricDistortion'), dict(type='PackDenseInputs')]

Result dicts use mmseg's keys: 'img' ('h w 3' uint8 RGB), 'gt_seg_map' ('h w' uint8), 'gt_depth'
('h w' float32 metres, 0 = invalid), 'ori_shape'/'img_shape' ``(h, w)`` and the paths; panoptic annotations add
'gt_segment_map' and 'segments' (:mod:`heads.transforms.panoptic`).
"""
from .base import DENSE_FIELDS, DenseTransform
from .crop import RandomCrop
from .flip import RandomFlip
from .formatting import PackDenseInputs
from .image_level import TorchvisionTransform
from .loading import LoadAnnotations, LoadImage, encode_labels
from .pad import Pad
from .panoptic import LoadPanopticAnnotations, panoptic_targets
from .photometric import PhotoMetricDistortion
from .resize import RandomChoiceResize, RandomResize, Resize

__all__ = ['DENSE_FIELDS', 'DenseTransform', 'LoadAnnotations', 'LoadImage', 'LoadPanopticAnnotations',
           'PackDenseInputs', 'Pad', 'PhotoMetricDistortion', 'RandomChoiceResize', 'RandomCrop', 'RandomFlip',
           'RandomResize', 'Resize', 'TorchvisionTransform', 'encode_labels', 'panoptic_targets']
