"""Camera poses of RGB-D sequences, read with errors that name the file (numpy only).

Microsoft 7-Scenes stores one pose per frame next to its images: ``seq-01/frame-000000.color.png``,
``frame-000000.depth.png`` and ``frame-000000.pose.txt``, the last a 4x4 camera-to-world matrix as text (4 rows of
4 numbers; a point ``p`` in the camera frame is ``R p + t`` in the world). The folder layout this project reads
(``rgb/frame-000000.jpg``, ``depth/...``; :mod:`.rgbd_folder`) keeps no poses; the copy under ``ZOO_DATA`` has none.
:func:`pose_path` finds a frame's pose file (the name up to its first dot, plus ``.pose.txt``), in the frame's own
folder or in ``pose_dir``; :func:`read_pose` reads one; :func:`read_poses` a sequence's, 'n 4 4'.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

POSE_SUFFIX = '.pose.txt'
#: How far a pose's rotation block may be from orthonormal (``max |R^T R - I|``): text files keep ~6 digits.
ORTHONORMAL_TOL = 1e-3


def pose_path(frame, pose_dir=None) -> Path:
    """The pose file of a frame's image or depth file: ``<pose_dir or its folder>/<name up to the first dot>.pose.txt``
    (``seq-01/frame-000000.color.png`` -> ``seq-01/frame-000000.pose.txt``)."""
    frame = Path(frame)
    return Path(pose_dir if pose_dir is not None else frame.parent) / (frame.name.split('.')[0] + POSE_SUFFIX)


def read_pose(path) -> np.ndarray:
    """float64 '4 4' camera-to-world matrix of a pose file, or an error naming the file: FileNotFoundError when it is
    absent, ValueError unless it holds 16 finite numbers, a bottom row [0, 0, 0, 1] and a rotation block."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pose file {path} does not exist (7-Scenes keeps frame-NNNNNN.pose.txt, a 4x4 "
                                f"camera-to-world matrix, next to each frame; copies without poses cannot give the "
                                f"temporal alignment error)")
    try:
        values = [float(v) for v in path.read_text().split()]
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"pose file {path} is not numbers: {err}") from err
    if len(values) != 16:
        raise ValueError(f"pose file {path} holds {len(values)} numbers; a pose is a 4x4 camera-to-world matrix "
                         f"(16 numbers, row by row)")
    pose = np.array(values).reshape(4, 4)
    if not np.isfinite(pose).all():
        raise ValueError(f"pose file {path} holds non-finite values (a frame where tracking failed?): "
                         f"{pose.tolist()}")
    if not np.allclose(pose[3], [0, 0, 0, 1]):
        raise ValueError(f"pose file {path}: the bottom row is {pose[3].tolist()}, not [0, 0, 0, 1]")
    rotation = pose[:3, :3]
    off = float(np.abs(rotation.T @ rotation - np.eye(3)).max())
    if off > ORTHONORMAL_TOL or np.linalg.det(rotation) < 0:
        raise ValueError(f"pose file {path}: the upper-left 3x3 block is no rotation (max |R^T R - I| = {off:.2g}, "
                         f"det = {np.linalg.det(rotation):.3g})")
    return pose


def read_poses(frames, pose_dir=None) -> np.ndarray:
    """float64 'n 4 4' camera-to-world poses of the frames (image or depth paths, in order; :func:`pose_path`)."""
    frames = list(frames)
    if not frames:
        raise ValueError("no frames given: nothing to read poses of")
    return np.stack([read_pose(pose_path(frame, pose_dir)) for frame in frames])
