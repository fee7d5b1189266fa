"""Temporal alignment error (TAE) of a depth video, as Video Depth Anything's benchmark defines it (Chen et al.,
CVPR 2025; their ``benchmark/eval/eval_tae.py``): how far each frame's depth, carried into the next frame by the
known camera motion, lands from that frame's own depth. It needs the camera poses and intrinsics of the sequence and
a ground truth (for the alignment only). numpy only.

**Alignment** (:func:`aligned_depth`): one scale ``s`` and shift ``t`` for the *whole* sequence, fitted by least
squares in disparity over the pixels whose ground truth is in ``(1e-3, max_depth)`` (strictly),

    p = max(prediction, 1e-3),    min_{s,t}  sum (s * p + t - 1 / (gt + 1e-8))**2,
    D = clip(1 / max(s * p + t, 1e-3), 1e-3, max_depth)        (metres, every pixel, gt valid or not).

**Pair term** (:func:`pair_error`): for frames ``a`` (source) and ``b`` (target) with camera-to-world poses
``T_a, T_b`` ('4 4') and intrinsics ``K`` (``fx, fy, cx, cy``), every pixel ``(u, v)`` of ``D_a`` (column, row;
pixel centres at integers) is the point ``P = (D_a (u - cx) / fx, D_a (v - cy) / fy, D_a)``, moved into ``b``'s
camera by ``T_b^-1 T_a``: ``P' = R P + t``, and splatted (:func:`project_depth`) at the rounded pixel
``(round(fx X'/Z' + cx), round(fy Y'/Z' + cy))`` (round half to even) with value ``Z'``, when inside the image. On
a collision the source pixel latest in row-major order wins: what the authors' ``depth_proj[y, x] = z`` (an
``index_put_`` without accumulation) does when it runs serially, on a CPU with one thread or few points. With
several CPU threads and more than a few thousand points (about 3000 with 2 threads, torch 2.15) its chunks race, and
on a GPU the order is unspecified: their figure on full-size frames is not defined to the last digit, this one is
(first-write-wins moves it by 0.1-0.2 %, relative, on the test sequences). A point behind the camera
(``Z' < 0``) is splatted too, with its negative value, and may win a collision; a non-finite projection
(``Z' = 0``) is outside. Then

    e(a -> b) = mean over {splat > 0, D_b > 0, mask_b} of |D_b - splat| / D_b,    and 0 if that set is empty

(also when no point lands inside the image: the authors' ``return 0`` cases, which still count in the mean).

**Figure** (:func:`temporal_alignment_error`), percent, over the ``N - 1`` consecutive pairs, both directions, with
pair ``i``'s intrinsics ``K_i`` for both:

    TAE = 100 / (2 (N - 1)) * sum_i [ e(i -> i+1; mask_{i+1}) + e(i+1 -> i; mask_i) ].

The ground truth is used by the alignment alone; ``masks`` (non-zero = counted), when given, select target pixels.
Predictions: a relative model's output, an affine-invariant disparity (``kind='disparity'``, the benchmark's input);
a metric model's depth in metres goes in with ``kind='depth'``: taken as disparity ``1 / depth`` (0 where the depth
is not > 0) and aligned the same way (the benchmark's protocol fits any input as disparity; a metric figure without
the fit is not what it reports). Benchmark details left to the caller:
their ScanNet run crops the maps (``[8:-8, 11:-11]``) yet keeps the uncropped ``K``; their predictions are float32
(as read from ``.npy``), their ground truths float64 ``raw / factor``. Skewed intrinsics are refused (the formula
has no skew). Equal to the authors' ``eval_TAE`` to 1e-6 relative on a synthetic sequence with collisions, points
behind the camera, both ``return 0`` cases and masks (tests/dense/test_tae.py, tests/reference_data/vda_tae_authors.py).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..io.pointcloud import check_intrinsics

#: The benchmark's floor on disparity and depth, and the lower bound of a valid ground truth (metres).
MIN_DEPTH = 1e-3
#: Added to the ground truth before it is inverted into the disparity that the alignment fits.
GT_EPS = 1e-8
KINDS = ('disparity', 'depth')


def _array(x, name: str) -> np.ndarray:
    """numpy array of an array-like, a torch tensor (any device) or a sequence of them (stacked)."""
    if hasattr(x, 'detach'):
        x = x.detach().cpu().numpy()
    elif isinstance(x, Sequence) and len(x) and hasattr(x[0], 'detach'):
        x = [v.detach().cpu().numpy() for v in x]
    try:
        return np.asarray(x) if not isinstance(x, (list, tuple)) else np.stack([np.asarray(v) for v in x])
    except ValueError as err:
        raise ValueError(f"{name}: the frames differ in shape ({err})") from err


def _maps(x, name: str, n: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """'n h w' array of ``x``, checked against ``n`` frames of ``shape``."""
    x = _array(x, name)
    if x.ndim == 4 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 3:
        raise ValueError(f"{name} has shape {x.shape}; expected one 'h w' map per frame ('n h w')")
    if n is not None and (len(x) != n or x.shape[1:] != shape):
        raise ValueError(f"{name}: {len(x)} maps of {x.shape[1:]}, but the predictions are {n} of {shape}")
    return x


def _intrinsics(k, name: str) -> tuple[float, float, float, float]:
    """``fx, fy, cx, cy`` of a pinhole camera matrix (:func:`heads.io.pointcloud.check_intrinsics`) without skew."""
    k = check_intrinsics(k, name)
    if k[0, 1] != 0:
        raise ValueError(f"{name}: the skew K[0, 1] = {k[0, 1]:g} must be zero (the projection has no skew)")
    return float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2])


def aligned_depth(predictions, gts, max_depth: float, kind: str = 'disparity') -> np.ndarray:
    """float64 'n h w' depth (metres) of the predictions 'n h w' after the one scale-shift fit in disparity against
    the ground truths 'n h w' (metres; module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {KINDS}: 'disparity' for a relative model's output, 'depth' "
                         f"for a metric model's metres")
    if not max_depth > MIN_DEPTH:
        raise ValueError(f"max_depth = {max_depth} must exceed {MIN_DEPTH} m")
    p = _maps(predictions, 'predictions')
    gt = _maps(gts, 'gts', len(p), p.shape[1:]).astype(np.float64)
    if p.dtype.kind != 'f':
        p = p.astype(np.float64)
    if not np.isfinite(p).all():
        raise ValueError(f"predictions hold {int((~np.isfinite(p)).sum())} non-finite values")
    if kind == 'depth':
        p = np.where(p > 0, 1.0 / np.where(p > 0, p, 1.0), 0.0).astype(p.dtype)
    p = np.clip(p, MIN_DEPTH, None).astype(np.float64)  # clipped in the prediction's own dtype, as theirs
    valid = (gt > MIN_DEPTH) & (gt < max_depth)
    if not valid.any():
        raise ValueError(f"no ground-truth pixel is in ({MIN_DEPTH}, {max_depth}) m: nothing to align on")
    design = np.stack([p[valid], np.ones(int(valid.sum()))], axis=1)
    (s, t), *_ = np.linalg.lstsq(design, 1.0 / (gt[valid] + GT_EPS), rcond=None)
    disparity = np.clip(s * p + t, MIN_DEPTH, None)
    return np.clip(1.0 / disparity, MIN_DEPTH, max_depth)


def splat(targets: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """float64 'size' map with ``values[j]`` at ``targets[j]`` (flat indices), 0 where nothing lands; of several
    values for one target, the last in order wins (deterministically)."""
    out = np.zeros(size)
    hit, first_from_end = np.unique(targets[::-1], return_index=True)
    out[hit] = values[::-1][first_from_end]
    return out


def project_depth(depth: np.ndarray, relative_pose: np.ndarray, intrinsics) -> np.ndarray:
    """float64 'h w' depth of the source ``depth`` 'h w' seen from the target camera: each pixel moved by
    ``relative_pose`` '4 4' (source camera -> target camera, ``T_target^-1 @ T_source`` of camera-to-world poses) and
    splatted at its rounded pixel (module docstring); 0 where no point lands."""
    depth = np.asarray(depth, dtype=np.float64)
    fx, fy, cx, cy = _intrinsics(intrinsics, 'intrinsics')
    relative_pose = np.asarray(relative_pose, dtype=np.float64)
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    points = np.stack([(u - cx) * depth / fx, (v - cy) * depth / fy, depth], axis=-1).reshape(-1, 3)
    x, y, z = (points @ relative_pose[:3, :3].T + relative_pose[:3, 3]).T
    with np.errstate(divide='ignore', invalid='ignore'):
        col, row = np.round(x * fx / z + cx), np.round(y * fy / z + cy)
    inside = np.isfinite(col) & np.isfinite(row) & (col >= 0) & (col < w) & (row >= 0) & (row < h)
    targets = row[inside].astype(np.int64) * w + col[inside].astype(np.int64)
    return splat(targets, z[inside], h * w).reshape(h, w)


def pair_error(source: np.ndarray, target: np.ndarray, relative_pose: np.ndarray, intrinsics,
               mask: np.ndarray | None = None) -> float:
    """``e(source -> target)``: mean ``|target - splat| / target`` over the pixels where the projected ``source``
    (:func:`project_depth`) and ``target`` are > 0 and ``mask`` (target's, non-zero = counted) holds; 0 if none."""
    projected = project_depth(source, relative_pose, intrinsics)
    target = np.asarray(target, dtype=np.float64)
    counted = (projected > 0) & (target > 0)
    if mask is not None:
        counted &= np.asarray(mask) != 0
    if not counted.any():
        return 0.0
    return float(np.mean(np.abs(target[counted] - projected[counted]) / target[counted]))


def temporal_alignment_error(predictions, gts, poses, intrinsics, max_depth: float, masks=None,
                             kind: str = 'disparity') -> float:
    """TAE (percent) of a sequence (module docstring).

    predictions: 'n h w' (or a list of 'h w'; numpy or torch) — a relative model's disparity (``kind='disparity'``)
        or a metric model's depth in metres (``kind='depth'``).
    gts: 'n h w' ground-truth depth in metres (invalid pixels 0, or outside (1e-3, max_depth)); used to align.
    poses: 'n 4 4' camera-to-world (7-Scenes' ``frame-NNNNNN.pose.txt``: :func:`heads.io.poses.read_poses`).
    intrinsics: '3 3' for every frame, or 'n 3 3' (pair ``i, i+1`` uses ``K_i``), for the maps' size.
    max_depth: metres; the ground truth's upper bound and the depth's clip (the benchmark: 10 for ScanNet).
    masks: None, or 'n h w' (non-zero = counted), each frame's mask applied where it is the target.
    """
    depth = aligned_depth(predictions, gts, max_depth, kind)
    n, h, w = depth.shape
    if n < 2:
        raise ValueError(f"{n} frame{'s' if n != 1 else ''}: the error compares consecutive frames and needs two")
    poses = _array(poses, 'poses').astype(np.float64)
    if poses.shape != (n, 4, 4) or not np.isfinite(poses).all():
        raise ValueError(f"poses has shape {poses.shape}; expected {n} finite camera-to-world matrices 'n 4 4'")
    ks = _array(intrinsics, 'intrinsics').astype(np.float64)
    ks = np.broadcast_to(ks, (n, 3, 3)) if ks.shape == (3, 3) else ks
    if ks.shape != (n, 3, 3):
        raise ValueError(f"intrinsics has shape {ks.shape}; expected '3 3' (every frame) or '{n} 3 3'")
    if masks is not None:
        masks = _maps(masks, 'masks', n, (h, w))
    total = 0.0
    for i in range(n - 1):
        forward = np.linalg.inv(poses[i + 1]) @ poses[i]  # camera i -> camera i+1
        backward = np.linalg.inv(forward)
        total += pair_error(depth[i], depth[i + 1], forward, ks[i], None if masks is None else masks[i + 1])
        total += pair_error(depth[i + 1], depth[i], backward, ks[i], None if masks is None else masks[i])
    return 100.0 * total / (2 * (n - 1))
