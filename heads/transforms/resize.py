"""Resizing: the image bilinearly, dense annotations with nearest neighbour (labels and invalid depth stay
exact). Scales follow mmcv: ``scale`` is ``(w, h)``; with ``keep_ratio`` the long image edge fits in
``max(scale)`` and the short edge in ``min(scale)``, so the orientation of ``scale`` does not matter.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..io.images import keep_ratio_size
from ..registry import TRANSFORMS
from .base import DenseTransform, present_fields, require_image


def _check_scale(scale) -> tuple[int, int]:
    if isinstance(scale, int):
        scale = (scale, scale)
    if not (isinstance(scale, Sequence) and len(scale) == 2 and all(int(s) > 0 for s in scale)):
        raise ValueError(f"scale must be a positive int or a (w, h) pair, got {scale!r}")
    return int(scale[0]), int(scale[1])


def target_size(shape: tuple[int, int], scale: tuple[int, int], keep_ratio: bool) -> tuple[int, int]:
    """The ``(h, w)`` an image of ``shape`` ``(h, w)`` is resized to for ``scale`` ``(w, h)``."""
    return keep_ratio_size(*shape, scale) if keep_ratio else (scale[1], scale[0])


def resize_results(results: dict, size: tuple[int, int]) -> dict:
    """Resize 'img' (bilinear) and every dense field (nearest) to ``size`` ``(h, w)``; update the shape keys."""
    img = require_image(results, 'Resize')
    (old_h, old_w), (h, w) = img.shape[:2], size
    results['img'] = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)  # 'h w 3'
    for key in present_fields(results):
        results[key] = cv2.resize(results[key], (w, h), interpolation=cv2.INTER_NEAREST)  # 'h w'
    results['img_shape'] = (h, w)
    results['scale_factor'] = (w / old_w, h / old_h)  # mmcv order: (w, h)
    return results


@TRANSFORMS.register_module()
class Resize(DenseTransform):
    """Deterministic resize to ``scale`` ``(w, h)`` (keep_ratio: fit long/short edges, see module doc).

    Resizes the image and the dense annotations loaded so far. In an mmseg-style test pipeline
    (LoadImage, Resize, LoadAnnotations, PackDenseInputs) the ground truth thus stays at the original size.
    """

    def __init__(self, scale, keep_ratio: bool = True):
        self.scale, self.keep_ratio = _check_scale(scale), keep_ratio

    def transform(self, results: dict) -> dict:
        shape = require_image(results, 'Resize').shape[:2]
        results['scale'], results['keep_ratio'] = self.scale, self.keep_ratio
        return resize_results(results, target_size(shape, self.scale, self.keep_ratio))


@TRANSFORMS.register_module()
class RandomResize(DenseTransform):
    """mmseg's random rescale: the target scale is ``scale * r`` with ``r ~ U(ratio_range)`` (no ratio_range:
    ``scale`` itself), then a :class:`Resize` to it. Randomness comes from ``np.random``.
    """

    def __init__(self, scale, ratio_range: tuple[float, float] | None = None, keep_ratio: bool = True):
        self.scale, self.keep_ratio = _check_scale(scale), keep_ratio
        if ratio_range is not None and not (len(ratio_range) == 2 and 0 < ratio_range[0] <= ratio_range[1]):
            raise ValueError(f"ratio_range must be (low, high) with 0 < low <= high, got {ratio_range!r}")
        self.ratio_range = None if ratio_range is None else tuple(ratio_range)

    def transform(self, results: dict) -> dict:
        shape = require_image(results, 'RandomResize').shape[:2]
        scale = self.scale
        if self.ratio_range is not None:
            low, high = self.ratio_range
            ratio = np.random.random_sample() * (high - low) + low
            scale = (int(scale[0] * ratio), int(scale[1] * ratio))
        results['scale'], results['keep_ratio'] = scale, self.keep_ratio
        return resize_results(results, target_size(shape, scale, self.keep_ratio))


def shortest_edge_size(shape: tuple[int, int], short_edge: int, max_size: int) -> tuple[int, int]:
    """The ``(h, w)`` of mmseg's ResizeShortestEdge (detectron2's rule) for an image of ``shape`` ``(h, w)``: the
    short edge to ``short_edge``, then all down so that the long edge is at most ``max_size``, rounded half up;
    mmseg then resizes with keep_ratio to that ``(w, h)``, which may move a side by a pixel (done here too)."""
    h, w = shape
    factor = short_edge / min(h, w)
    new_h, new_w = (short_edge, factor * w) if h < w else (factor * h, short_edge)
    if max(new_h, new_w) > max_size:
        factor = max_size / max(new_h, new_w)
        new_h, new_w = new_h * factor, new_w * factor
    return target_size(shape, (int(new_w + 0.5), int(new_h + 0.5)), keep_ratio=True)


@TRANSFORMS.register_module()
class RandomChoiceResize(DenseTransform):
    """mmcv's RandomChoiceResize: one of ``scales`` drawn uniformly (``np.random``), then mmseg's
    ``ResizeShortestEdge`` (``scales`` are short-edge lengths, ``max_size`` bounds the long edge;
    :func:`shortest_edge_size`) or a keep-ratio :class:`Resize` (``resize_type='Resize'``, ``scales`` are (w, h)).
    mmseg's Mask2Former ADE20K recipe: ``scales=[int(512 * x * 0.1) for x in range(5, 21)]``,
    ``resize_type='ResizeShortestEdge', max_size=2048``."""

    def __init__(self, scales, resize_type: str = 'ResizeShortestEdge', max_size: int | None = None):
        if resize_type not in ('ResizeShortestEdge', 'Resize'):
            raise ValueError(f"resize_type must be 'ResizeShortestEdge' or 'Resize', got {resize_type!r}")
        if resize_type == 'ResizeShortestEdge' and (max_size is None or any(int(s) <= 0 for s in scales)):
            raise ValueError(f"ResizeShortestEdge needs positive short-edge scales and max_size, got {scales!r}, "
                             f"max_size={max_size!r}")
        if not scales:
            raise ValueError("RandomChoiceResize needs at least one scale")
        self.scales = [int(s) for s in scales] if resize_type == 'ResizeShortestEdge' else \
            [_check_scale(s) for s in scales]
        self.resize_type, self.max_size = resize_type, max_size

    def transform(self, results: dict) -> dict:
        shape = require_image(results, 'RandomChoiceResize').shape[:2]
        index = np.random.randint(len(self.scales))
        scale = self.scales[index]
        size = shortest_edge_size(shape, scale, self.max_size) if self.resize_type == 'ResizeShortestEdge' else \
            target_size(shape, scale, keep_ratio=True)
        results['scale_idx'], results['keep_ratio'] = index, True
        return resize_results(results, size)
