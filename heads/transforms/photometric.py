"""mmseg's PhotoMetricDistortion on uint8 RGB images."""
from __future__ import annotations

import cv2
import numpy as np

from ..registry import TRANSFORMS
from .base import DenseTransform, require_image


def _affine(img: np.ndarray, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """``img * alpha + beta`` computed in float32, clipped back to uint8 (mmseg's ``convert``)."""
    return np.clip(img.astype(np.float32) * alpha + beta, 0, 255).astype(np.uint8)


@TRANSFORMS.register_module()
class PhotoMetricDistortion(DenseTransform):
    """Random brightness, contrast, saturation and hue, each applied with probability 0.5 (``np.random``).

    Order (mmseg): brightness; contrast here if ``mode == 1``; saturation; hue; contrast here if
    ``mode == 0``, with ``mode`` a fair coin. Saturation and hue act in OpenCV's 8-bit HSV (hue in 0..179).
    The input and output are 'h w 3' uint8 RGB; annotations are untouched.
    """

    def __init__(self, brightness_delta: int = 32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5),
                 hue_delta: int = 18):
        self.brightness_delta, self.hue_delta = brightness_delta, hue_delta
        self.contrast_range, self.saturation_range = tuple(contrast_range), tuple(saturation_range)

    def brightness(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            return _affine(img, beta=np.random.uniform(-self.brightness_delta, self.brightness_delta))
        return img

    def contrast(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            return _affine(img, alpha=np.random.uniform(*self.contrast_range))
        return img

    def saturation(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)  # 'h w (hue sat val)'
            hsv[..., 1] = _affine(hsv[..., 1], alpha=np.random.uniform(*self.saturation_range))
            return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
        return img

    def hue(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
            shift = np.random.randint(-self.hue_delta, self.hue_delta) if self.hue_delta else 0
            hsv[..., 0] = (hsv[..., 0].astype(int) + shift) % 180
            return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
        return img

    def transform(self, results: dict) -> dict:
        img = self.brightness(require_image(results, 'PhotoMetricDistortion'))
        mode = np.random.randint(2)
        if mode == 1:
            img = self.contrast(img)
        img = self.hue(self.saturation(img))
        if mode == 0:
            img = self.contrast(img)
        results['img'] = img
        return results
