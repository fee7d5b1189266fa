"""mmseg's RandomCrop, with the category-ratio retry that keeps crops from being all one class."""
from __future__ import annotations

import numpy as np

from ..io.labels import IGNORE_INDEX
from ..registry import TRANSFORMS
from .base import DenseTransform, present_fields, require_image


@TRANSFORMS.register_module()
class RandomCrop(DenseTransform):
    """Crop ``crop_size`` ``(h, w)`` (an int means square) at a uniformly random offset (``np.random``).

    Where the image is smaller than the crop, the crop spans the whole extent in that direction (no padding;
    add :class:`Pad` after it for fixed-size batches). With ``cat_max_ratio < 1`` the offset is redrawn, up to
    10 times, while the crop's most frequent class covers more than ``cat_max_ratio`` of its non-ignored
    pixels or only one class is present (mmseg semantics). img and every dense field are cropped identically.
    """

    def __init__(self, crop_size, cat_max_ratio: float = 1.0, ignore_index: int = IGNORE_INDEX):
        crop_size = (crop_size, crop_size) if isinstance(crop_size, int) else tuple(crop_size)
        if len(crop_size) != 2 or min(crop_size) <= 0:
            raise ValueError(f"crop_size must be a positive int or an (h, w) pair, got {crop_size!r}")
        self.crop_size, self.cat_max_ratio, self.ignore_index = crop_size, cat_max_ratio, ignore_index

    def random_box(self, shape: tuple[int, int]) -> tuple[int, int, int, int]:
        """A random ``(y1, y2, x1, x2)`` crop box inside an image of ``shape`` ``(h, w)``."""
        margin_h, margin_w = (max(size - crop, 0) for size, crop in zip(shape, self.crop_size))
        y1, x1 = np.random.randint(0, margin_h + 1), np.random.randint(0, margin_w + 1)
        return y1, y1 + self.crop_size[0], x1, x1 + self.crop_size[1]

    def _balanced(self, labels: np.ndarray) -> bool:
        classes, counts = np.unique(labels, return_counts=True)
        counts = counts[classes != self.ignore_index]
        return len(counts) > 1 and counts.max() / counts.sum() < self.cat_max_ratio

    def transform(self, results: dict) -> dict:
        img = require_image(results, 'RandomCrop')
        box = self.random_box(img.shape[:2])
        if self.cat_max_ratio < 1.0 and results.get('gt_seg_map') is not None:
            for _ in range(10):
                y1, y2, x1, x2 = box
                if self._balanced(results['gt_seg_map'][y1:y2, x1:x2]):
                    break
                box = self.random_box(img.shape[:2])
        y1, y2, x1, x2 = box
        for key in ['img', *present_fields(results)]:
            results[key] = np.ascontiguousarray(results[key][y1:y2, x1:x2])  # 'h w ...' -> 'ch cw ...'
        results['img_shape'] = results['img'].shape[:2]
        return results
