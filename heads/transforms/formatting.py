"""Packing a result dict into the ``{'inputs', 'data_samples'}`` form that DensePreprocessor batches."""
from __future__ import annotations

import numpy as np
import torch
from mmengine.structures import BaseDataElement, PixelData

from ..registry import TRANSFORMS
from .base import DenseTransform, require_image
from .panoptic import panoptic_targets

DEFAULT_META_KEYS = ('img_path', 'seg_map_path', 'depth_path', 'ori_shape', 'img_shape', 'flip',
                     'reduce_zero_label')


@TRANSFORMS.register_module()
class PackDenseInputs(DenseTransform):
    """``results`` -> ``{'inputs': uint8 '3 h w' RGB tensor, 'data_samples': BaseDataElement}``.

    The data sample's metainfo holds the ``meta_keys`` present in ``results``; it gets ``gt_sem_seg``
    (PixelData, int64 '1 h w') if 'gt_seg_map' is loaded and ``gt_depth`` (PixelData, float32 '1 h w',
    metres, 0 = invalid) if 'gt_depth' is loaded, and ``gt_label`` (int64 scalar tensor) for an image-level
    'gt_label' (classification). A panoptic annotation ('gt_segment_map' and 'segments', needing 'num_classes'
    in ``results``) adds ``gt_instances`` and ``gt_panoptic_seg`` (:func:`~heads.transforms.panoptic_targets`).
    """

    def __init__(self, meta_keys=DEFAULT_META_KEYS):
        self.meta_keys = tuple(meta_keys)

    def transform(self, results: dict) -> dict:
        img = require_image(results, 'PackDenseInputs')
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(f"PackDenseInputs expects an 'h w 3' image, got shape {img.shape} "
                             f"for {results.get('img_path')}")
        inputs = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))  # 'h w 3' -> '3 h w'
        sample = BaseDataElement(metainfo={k: results[k] for k in self.meta_keys if k in results})
        if results.get('gt_seg_map') is not None:
            labels = results['gt_seg_map'].astype(np.int64)[None]  # 'h w' -> '1 h w'
            sample.gt_sem_seg = PixelData(data=torch.from_numpy(labels))
        if results.get('gt_depth') is not None:
            depth = np.ascontiguousarray(results['gt_depth'], dtype=np.float32)[None]  # 'h w' -> '1 h w'
            sample.gt_depth = PixelData(data=torch.from_numpy(depth))
        if results.get('gt_segment_map') is not None:
            if results.get('num_classes') is None:
                raise KeyError(f"PackDenseInputs needs results['num_classes'] to pack the panoptic annotation of "
                               f"{results.get('img_path')} (void = num_classes); datasets with classes add it")
            sample.gt_instances, sample.gt_panoptic_seg = panoptic_targets(
                results['gt_segment_map'], results['segments'], results['num_classes'],
                with_stuff=results.get('stuff_instances', True))
        if results.get('gt_label') is not None:
            sample.gt_label = torch.tensor(int(results['gt_label']), dtype=torch.int64)
        return {'inputs': inputs, 'data_samples': sample}
