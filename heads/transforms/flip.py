"""Horizontal random flip of the image and all dense annotations."""
from __future__ import annotations

import numpy as np

from ..registry import TRANSFORMS
from .base import DenseTransform, present_fields, require_image


@TRANSFORMS.register_module()
class RandomFlip(DenseTransform):
    """Mirror left-right with probability ``prob`` (``np.random``); sets 'flip' and 'flip_direction'."""

    def __init__(self, prob: float = 0.5):
        if not 0.0 <= prob <= 1.0:
            raise ValueError(f"prob must be in [0, 1], got {prob}")
        self.prob = prob

    def transform(self, results: dict) -> dict:
        require_image(results, 'RandomFlip')
        flip = bool(np.random.rand() < self.prob)
        if flip:
            for key in ['img', *present_fields(results)]:
                results[key] = np.ascontiguousarray(results[key][:, ::-1])  # 'h w ...', w reversed
        results['flip'], results['flip_direction'] = flip, 'horizontal' if flip else None
        return results
