"""Depth on video: a temporal-consistency (flicker) figure of a sequence of depth maps, and alignment smoothed over
time.

**Figure** (:func:`temporal_consistency`, streaming :class:`TemporalConsistency`): for each pair of consecutive frames
``i - 1, i``, the mean relative change of depth ``|D_i - D_{i-1}| / D_{i-1}`` over the *static* pixels valid (finite,
> 0) in both; the figure is the mean over pairs (pairs without such a pixel skipped), in percent. The depth is the
sequence's output as given: metric depth as predicted, or a relative model's disparity taken as depth ``1 / p``
(up to scale, which a relative change does not see; its unknown shift is not removed). A ground truth, where there
is one, may first align the whole sequence with *one* scale and shift (:func:`align_sequence`): one map for every
frame leaves the frame-to-frame flicker in place (per-frame alignment would hide it).

**Static pixels**: a pixel whose scene did not change between the two frames, so that its depth should not either.
Two stand-ins: :func:`photometric_static` (grey level changes by less than ``threshold`` of 255, default 10) when
only the images are known, or :func:`depth_static` (ground-truth depth changes by less than ``rel_tol``, default 2 %)
when a ground truth is. On a sequence filmed by a moving camera (7-Scenes) no pixel sees exactly the same point twice:
"static" then means photometrically (or geometrically) stable pixels, which a slow camera leaves in large textureless
or distant areas; the figure there is a flicker *plus* real motion, and serves to compare methods on one sequence.

**Smoothed alignment** (:class:`SmoothedAlignment`): per frame, the prediction ``p_i`` (the model's own output:
disparity for a relative model, ``mode='scale_shift_disparity'``; depth for a metric one, ``mode='median'``) is
aligned to a reference that is an exponential moving average over time,

    r_0 = a_0,    r_i = alpha * a_i + (1 - alpha) * q_{i-1},    q_i = s_i * p_i + t_i,

where ``a_i`` (the anchor) is the frame's ground truth in the prediction's domain (``1 / gt`` or ``gt``) when given,
else the prediction itself, and ``s_i, t_i`` fit ``p_i`` to ``r_i`` on the pixels valid in all three: least squares
in disparity (:func:`heads.evaluation.metrics.fit_scale_shift`) or, for ``'median'``, ``s_i = median(r_i) /
median(p_i)``, ``t_i = 0``. ``alpha`` in (0, 1]: the weight of the new frame; 1 is no smoothing (the raw prediction, or
per-frame alignment to the ground truth), smaller values follow the anchors more slowly. Without a ground truth and
with predictions ``p_i = k_i * d`` (one disparity, jittered scales), the output is ``c_i * d`` with
``c_i = alpha * k_i + (1 - alpha) * c_{i-1}``: the exponential moving average of the scales. The fit is global (two
numbers per frame), so the small motion between consecutive frames averages out in it.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .metrics import fit_scale_shift

MODES = ('scale_shift_disparity', 'median')


def valid(x: np.ndarray) -> np.ndarray:
    """Finite and > 0."""
    return np.isfinite(x) & (x > 0)


def depth_of(prediction: np.ndarray, relative: bool) -> np.ndarray:
    """Depth of a prediction: itself (metric) or ``1 / p`` (a relative disparity, up to scale); 0 where invalid."""
    prediction = np.asarray(prediction, dtype=np.float64)
    if not relative:
        return np.where(valid(prediction), prediction, 0.0)
    return np.where(valid(prediction), 1.0 / np.where(valid(prediction), prediction, 1.0), 0.0)


def grey(image: np.ndarray) -> np.ndarray:
    """float 'h w' luma (ITU-R BT.601 weights) of an RGB 'h w 3' image, or the image itself if 'h w'."""
    image = np.asarray(image, dtype=np.float64)
    return image if image.ndim == 2 else image[..., :3] @ np.array([0.299, 0.587, 0.114])


def photometric_static(previous_image: np.ndarray, image: np.ndarray, threshold: float = 10.0) -> np.ndarray:
    """bool 'h w': pixels whose grey level changes by less than ``threshold`` (of 255) between the two images."""
    if np.shape(previous_image)[:2] != np.shape(image)[:2]:
        raise ValueError(f"consecutive frames differ in size: {np.shape(previous_image)} then {np.shape(image)}")
    return np.abs(grey(image) - grey(previous_image)) < threshold


def depth_static(previous_gt: np.ndarray, gt: np.ndarray, rel_tol: float = 0.02) -> np.ndarray:
    """bool 'h w': pixels valid in both ground truths whose depth changes by less than ``rel_tol`` (relative)."""
    both = valid(previous_gt) & valid(gt)
    change = np.abs(gt - previous_gt) / np.where(both, previous_gt, 1.0)
    return both & (change < rel_tol)


def relative_change(previous_depth: np.ndarray, depth: np.ndarray, static: np.ndarray | None = None) -> float:
    """Mean ``|D - D_prev| / D_prev`` over the ``static`` pixels valid in both (NaN if there is none)."""
    if np.shape(previous_depth) != np.shape(depth):
        raise ValueError(f"consecutive depth maps differ in size: {np.shape(previous_depth)} then {np.shape(depth)}")
    mask = valid(previous_depth) & valid(depth)
    if static is not None:
        mask &= static
    if not mask.any():
        return float('nan')
    return float(np.mean(np.abs(depth[mask] - previous_depth[mask]) / previous_depth[mask]))


class TemporalConsistency:
    """The figure of the module docstring, one frame at a time: ``update(depth, image=None, static=None)``, then
    ``value`` (percent; NaN before a pair counts). The static pixels of each pair: ``static`` when given, else
    :func:`photometric_static` of this frame's and the previous frame's images (``threshold``), else all pixels."""

    def __init__(self, threshold: float = 10.0):
        self.threshold = threshold
        self.changes: list[float] = []
        self.previous = None

    def update(self, depth: np.ndarray, image: np.ndarray | None = None, static: np.ndarray | None = None) -> float:
        """Count the pair (previous frame, this frame); returns its relative change (NaN for the first frame)."""
        depth = np.asarray(depth, dtype=np.float64)
        change = float('nan')
        if self.previous is not None:
            previous_depth, previous_image = self.previous
            if static is None and image is not None and previous_image is not None:
                static = photometric_static(previous_image, image, self.threshold)
            change = relative_change(previous_depth, depth, static)
            self.changes.append(change)
        self.previous = (depth, image)
        return change

    @property
    def value(self) -> float:
        counted = [c for c in self.changes if np.isfinite(c)]
        return 100.0 * float(np.mean(counted)) if counted else float('nan')

    @property
    def frames(self) -> int:
        """The frames counted so far."""
        return len(self.changes) + (self.previous is not None)

    @property
    def undefined_because(self) -> str | None:
        """Why ``value`` is NaN (a sentence), or None when it is a number."""
        if any(np.isfinite(c) for c in self.changes):
            return None
        if not self.changes:
            return (f'{self.frames} frame{"" if self.frames == 1 else "s"}: the figure compares consecutive frames '
                    f'and needs at least two')
        return (f'no pair of the {self.frames} consecutive frames has a pixel that is static (grey change below '
                f'{self.threshold:g}) and valid in both')


def temporal_consistency(depths: Sequence[np.ndarray], images: Sequence[np.ndarray] | None = None,
                         statics: Sequence[np.ndarray] | None = None, threshold: float = 10.0) -> float:
    """The figure (percent) of ``depths`` (each 'h w'); static pixels per pair from ``statics`` (one per pair, i.e.
    ``len(depths) - 1``), else from ``images`` (:func:`photometric_static`), else every pixel."""
    if statics is not None and len(statics) != len(depths) - 1:
        raise ValueError(f"statics: one mask per consecutive pair ({len(depths) - 1}), got {len(statics)}")
    meter = TemporalConsistency(threshold)
    for i, depth in enumerate(depths):
        meter.update(depth, None if images is None else images[i],
                     None if statics is None or i == 0 else statics[i - 1])
    return meter.value


def _fit(prediction: np.ndarray, reference: np.ndarray, mask: np.ndarray, mode: str) -> tuple[float, float]:
    """``s, t`` mapping ``prediction`` onto ``reference`` on ``mask`` (see the module docstring)."""
    if not mask.any():
        raise ValueError("no pixel is valid in both the prediction and its reference: nothing to align on")
    if mode == 'median':
        return float(np.median(reference[mask]) / np.median(prediction[mask])), 0.0
    s, t = fit_scale_shift(torch.from_numpy(prediction[mask]), torch.from_numpy(reference[mask]))
    return float(s), float(t)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"alignment mode {mode!r} is not one of {MODES} ('scale_shift_disparity' for a relative "
                         f"model's disparity, 'median' for metric depth)")


def _anchor(gt: np.ndarray, mode: str) -> np.ndarray:
    """The ground truth in the prediction's domain: disparity ``1 / gt`` or depth; 0 where invalid."""
    return depth_of(gt, relative=mode == 'scale_shift_disparity')


def align_sequence(predictions: Sequence[np.ndarray], gts: Sequence[np.ndarray],
                   mode: str = 'scale_shift_disparity') -> list[np.ndarray]:
    """Every prediction mapped by *one* ``s, t`` fitted over the valid pixels of the whole sequence against the
    ground truths (in the prediction's domain); returns the mapped predictions (same domain)."""
    _check_mode(mode)
    predictions = [np.asarray(p, dtype=np.float64) for p in predictions]
    anchors = [_anchor(g, mode) for g in gts]
    masks = [valid(p) & valid(a) for p, a in zip(predictions, anchors)]
    s, t = _fit(np.concatenate([p[m] for p, m in zip(predictions, masks)]),
                np.concatenate([a[m] for a, m in zip(anchors, masks)]), np.ones(sum(m.sum() for m in masks), bool),
                mode)
    return [s * p + t for p in predictions]


class SmoothedAlignment:
    """Alignment smoothed over time (module docstring): call once per frame, in order,
    ``aligned = smoother(prediction, gt=None)``; ``aligned`` is in the prediction's domain (disparity or depth).
    ``scales`` / ``shifts`` keep each frame's ``s_i, t_i``."""

    def __init__(self, alpha: float = 0.5, mode: str = 'scale_shift_disparity'):
        if not 0 < alpha <= 1:
            raise ValueError(f"smoothing alpha = {alpha} must be in (0, 1]: the weight of each new frame "
                             f"(1 = no smoothing)")
        _check_mode(mode)
        self.alpha, self.mode = alpha, mode
        self.previous: np.ndarray | None = None
        self.scales: list[float] = []
        self.shifts: list[float] = []

    def __call__(self, prediction: np.ndarray, gt: np.ndarray | None = None) -> np.ndarray:
        prediction = np.asarray(prediction, dtype=np.float64)
        anchor = prediction if gt is None else _anchor(gt, self.mode)
        if self.previous is None:
            reference, mask = anchor, valid(anchor)
        else:
            if self.previous.shape != prediction.shape:
                raise ValueError(f"frames differ in size: {self.previous.shape} then {prediction.shape}")
            reference = self.alpha * anchor + (1 - self.alpha) * self.previous
            mask = valid(anchor) & valid(self.previous)
        s, t = _fit(prediction, reference, mask & valid(prediction), self.mode)
        aligned = np.where(valid(prediction), s * prediction + t, 0.0)
        self.scales.append(s)
        self.shifts.append(t)
        self.previous = aligned
        return aligned


def smooth_sequence(predictions: Sequence[np.ndarray], gts: Sequence[np.ndarray] | None = None, alpha: float = 0.5,
                    mode: str = 'scale_shift_disparity') -> list[np.ndarray]:
    """:class:`SmoothedAlignment` over a whole sequence (``gts``: one per frame, or None)."""
    smoother = SmoothedAlignment(alpha, mode)
    return [smoother(p, None if gts is None else gts[i]) for i, p in enumerate(predictions)]
