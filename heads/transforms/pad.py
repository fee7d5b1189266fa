"""Bottom/right padding to a fixed size and/or a multiple of a divisor."""
from __future__ import annotations

import numpy as np

from ..io.labels import IGNORE_INDEX
from ..registry import TRANSFORMS
from .base import DenseTransform, present_fields, require_image


@TRANSFORMS.register_module()
class Pad(DenseTransform):
    """Pad bottom/right to ``size`` ``(w, h)`` (mmcv order) and/or up to a multiple of ``size_divisor``.

    img is padded with ``pad_val``, label fields with ``seg_pad_val`` (ignored), 'gt_depth' with 0 (invalid),
    'gt_segment_map' with 0 (void).
    Sets 'pad_shape' and, as mmcv does, 'img_shape' to the padded ``(h, w)``.
    """

    def __init__(self, size=None, size_divisor: int | None = None, pad_val: float = 0,
                 seg_pad_val: int = IGNORE_INDEX):
        if size is None and size_divisor is None:
            raise ValueError("Pad needs size=(w, h) and/or size_divisor")
        self.size = (size, size) if isinstance(size, int) else (None if size is None else tuple(size))
        self.size_divisor, self.pad_val, self.seg_pad_val = size_divisor, pad_val, seg_pad_val

    def target_shape(self, shape: tuple[int, int]) -> tuple[int, int]:
        """The padded ``(h, w)`` of an image of ``shape`` ``(h, w)``."""
        h, w = shape if self.size is None else (self.size[1], self.size[0])
        if h < shape[0] or w < shape[1]:
            raise ValueError(f"Pad size {self.size} (w, h) is smaller than the {shape[0]}x{shape[1]} (h x w) "
                             f"image; crop or resize it first (e.g. RandomCrop) or use a larger size")
        if self.size_divisor:
            d = self.size_divisor
            h, w = -(-h // d) * d, -(-w // d) * d
        return h, w

    def transform(self, results: dict) -> dict:
        img = require_image(results, 'Pad')
        h, w = self.target_shape(img.shape[:2])
        for key in ['img', *present_fields(results)]:
            value = self.pad_val if key == 'img' else 0 if key in ('gt_depth', 'gt_segment_map') else self.seg_pad_val
            array = results[key]
            widths = [(0, h - array.shape[0]), (0, w - array.shape[1])] + [(0, 0)] * (array.ndim - 2)
            results[key] = np.pad(array, widths, constant_values=value)  # 'h w ...' -> 'H W ...'
        results['pad_shape'] = results['img_shape'] = (h, w)
        return results
