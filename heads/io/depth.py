"""Depth maps, validity masks and camera intrinsics of RGB-D folders, read with errors that name the file.

numpy and OpenCV only, so that ``tools/check_dataset.py`` uses the same reader as the datasets before torch is
imported. Encodings: a single-channel 16-bit (or 8-bit) PNG of raw integers, or a ``.npy`` array 'h w' (also
'1 h w' / 'h w 1') of any real dtype; metres = raw / ``depth_scale``. Raw values listed in ``depth_invalid`` and
non-finite values mean "no measurement" and become 0. OpenEXR is refused (:func:`check_depth_suffix`): this
OpenCV build reads it only with the ``OPENCV_IO_ENABLE_OPENEXR`` environment flag set, if at all.

Folder layout (as Microsoft 7-Scenes): ``rgb/<stem>.jpg|png``, ``depth/<stem>.png|npy``, optional
``mask/<stem>.png`` (non-zero = valid), optional intrinsics: one ``camera-intrinsics.txt`` for every frame or
``intrinsics/<stem>.txt`` per frame, each a 3x3 matrix or the four numbers ``fx fy cx cy``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .files import files_under
from .images import ImageError, decode
from .pointcloud import check_intrinsics

#: The suffixes an RGB-D folder's images and depth maps may have (the first found for a stem is used).
RGB_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp')
DEPTH_SUFFIXES = ('.png', '.npy')
#: The shared intrinsics file of a folder (7-Scenes' name) and the folder of per-frame ones.
SHARED_INTRINSICS, INTRINSICS_DIR = 'camera-intrinsics.txt', 'intrinsics'

EXR_ADVICE = ("OpenEXR depth is not read here (this OpenCV reads EXR only with the OPENCV_IO_ENABLE_OPENEXR "
              "environment flag, if built with it): convert each file to a .npy array first, e.g. "
              "`np.save('x.npy', imageio.v3.imread('x.exr'))` (float metres: depth_scale=1), or to a 16-bit PNG "
              "of round(depth * 1000) (millimetres: depth_scale=1000)")


def check_depth_suffix(path) -> None:
    """ImageError for OpenEXR depth (.exr), which this reader refuses, saying how to convert it."""
    if Path(path).suffix.lower() == '.exr':
        raise ImageError(f"depth map {path}: {EXR_ADVICE}")


def read_raw_depth(path) -> np.ndarray:
    """The stored depth values of ``path``, 'h w' as stored: any real dtype from .npy; otherwise decoded by OpenCV
    (cv2.IMREAD_UNCHANGED), which must give a single-channel uint16 or uint8 image (a PNG)."""
    check_depth_suffix(path)
    path = Path(path)
    if path.suffix.lower() == '.npy':
        if not path.is_file():
            raise FileNotFoundError(f"depth map {path} does not exist")
        try:
            raw = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise ImageError(f"cannot read depth map {path}: {err} (a truncated or non-numpy file?)") from err
        if raw.ndim == 3 and 1 in (raw.shape[0], raw.shape[2]):
            raw = raw.reshape(raw.shape[1:] if raw.shape[0] == 1 else raw.shape[:2])
        if raw.ndim != 2 or raw.dtype.kind not in 'uif':
            raise ImageError(f"depth map {path} is a {raw.dtype} array of shape {raw.shape}; a .npy depth map "
                             f"must be a real 'h w' array")
        return raw
    import cv2
    raw = decode(path, cv2.IMREAD_UNCHANGED, 'depth map')
    if raw.ndim != 2 or raw.dtype not in (np.uint8, np.uint16):
        raise ImageError(f"depth map {path} is a {raw.dtype} array of shape {raw.shape}; a depth map must "
                         f"be a single-channel 16-bit (or 8-bit) PNG of raw depth values")
    return raw


def depth_in_metres(raw: np.ndarray, depth_scale: float, depth_invalid) -> np.ndarray:
    """float32 'h w' metres = raw / ``depth_scale``; raw values in ``depth_invalid`` and non-finite ones -> 0."""
    invalid = np.isin(raw, list(depth_invalid))
    if raw.dtype.kind == 'f':
        invalid |= ~np.isfinite(raw)
    depth = raw.astype(np.float32) / np.float32(depth_scale)
    depth[invalid] = 0.0
    return depth


def read_mask(path) -> np.ndarray:
    """bool 'h w' validity mask of a single-channel PNG (non-zero = valid)."""
    import cv2
    raw = decode(path, cv2.IMREAD_UNCHANGED, 'validity mask')
    if raw.ndim != 2:
        raise ImageError(f"validity mask {path} has shape {raw.shape}; a mask is a single-channel PNG "
                         f"(non-zero = valid)")
    return raw != 0


def read_intrinsics(path) -> list[list[float]]:
    """The 3x3 camera matrix of a text file holding it (7-Scenes' camera-intrinsics.txt) or ``fx fy cx cy``; a
    ValueError naming the file unless it is a pinhole matrix with finite values and positive focal lengths
    (:func:`heads.io.pointcloud.check_intrinsics`)."""
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError as err:
        raise ValueError(f"intrinsics file {path} is not text: {err}") from err
    try:
        values = [float(v) for v in text.split()]
    except ValueError as err:
        raise ValueError(f"intrinsics file {path} is not numbers: {err}") from err
    name = f'intrinsics file {path}'
    return check_intrinsics(camera_matrix(values, name), name).tolist()  # finite, positive focal lengths, pinhole


def camera_matrix(values, name: str = 'intrinsics') -> list[list[float]]:
    """The 3x3 camera matrix of 9 numbers (row by row) or of ``fx fy cx cy``; a ValueError naming ``name`` else."""
    values = [float(v) for v in values]
    if len(values) == 4:
        fx, fy, cx, cy = values
        values = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
    if len(values) != 9:
        raise ValueError(f"{name} holds {len(values)} numbers; expected a 3x3 camera matrix (9 numbers) or "
                         f"'fx fy cx cy'")
    return [values[0:3], values[3:6], values[6:9]]


def checked_depth_scale(depth_scale) -> float:
    """``depth_scale`` as a float, or a ValueError unless it is a finite positive number (raw / it = metres)."""
    try:
        value = float(depth_scale)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"depth_scale must be a finite positive number (raw / depth_scale = metres: 1000 for "
                         f"millimetres, 1 for float metres), got {depth_scale!r}")
    return value


def stems(folder, suffixes) -> dict[str, Path]:
    """``{relative path without suffix: path}`` of the files under ``folder`` ending in one of ``suffixes``
    (case-insensitive; symbolic links to folders followed), sorted; {} without the folder. A stem with several
    files keeps the first suffix of the list: :func:`stems_and_clashes` names them."""
    return stems_and_clashes(folder, suffixes)[0]


def stems_and_clashes(folder, suffixes) -> tuple[dict[str, Path], dict[str, list[Path]]]:
    """(:func:`stems`, ``{stem: [its files]}`` of each stem found in more than one file, e.g. ``a.png`` and
    ``a.npy``, or ``a.png`` and ``a.PNG``: which one is meant cannot be told)."""
    order = [s.lower() for s in suffixes]
    found: dict[str, list[tuple[int, Path]]] = {}
    folder = Path(folder)
    for path in files_under(folder):
        relative = str(path.relative_to(folder))
        rank = next((i for i, s in enumerate(order) if relative.lower().endswith(s)), None)
        if rank is not None:
            found.setdefault(relative[:-len(order[rank])], []).append((rank, path))
    best = {stem: min(files, key=lambda f: (f[0], str(f[1])))[1] for stem, files in sorted(found.items())}
    clashes = {stem: sorted(p for _, p in files) for stem, files in sorted(found.items()) if len(files) > 1}
    return best, clashes
