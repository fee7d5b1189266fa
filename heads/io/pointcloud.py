"""Point clouds of depth maps: back-projection with the camera intrinsics, the inverse projection, and binary PLY
files (numpy only).

Camera model: pinhole, ``K = [[fx, s, cx], [0, fy, cy], [0, 0, 1]]`` (``s``: skew, usually 0), camera frame x right,
y down, z forward (OpenCV's). Pixel ``(u, v)`` = (column, row) has its centre at integer coordinates, as in OpenCV
and 7-Scenes' ``camera-intrinsics.txt`` (fx = fy = 585, cx = 320, cy = 240 for 640x480). A pixel of depth ``z``
(metres along the optical axis, not along the ray) is the point ``z * K^-1 [u, v, 1]``.

Size rule: intrinsics belong to an image size, that of the images as stored (``image_size``, (w, h)). A depth map of
another size (a prediction at the network's resolution) uses them scaled by the size ratio per axis, ``rx = w' / w``,
``ry = h' / h``, keeping pixel centres on the same scene rays (``cv2.resize``'s half-pixel mapping
``u' + 0.5 = (u + 0.5) * rx``): ``fx' = fx * rx``, ``s' = s * rx``, ``cx' = (cx + 0.5) * rx - 0.5`` and likewise
``fy' = fy * ry``, ``cy' = (cy + 0.5) * ry - 0.5`` (:func:`scale_intrinsics`).

PLY: ``binary_little_endian 1.0``, one ``vertex`` element with ``float x, y, z`` and, with colours,
``uchar red, green, blue`` (what MeshLab, CloudCompare and Open3D read). :func:`read_ply` reads such files back.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

XYZ = [('x', '<f4'), ('y', '<f4'), ('z', '<f4')]
RGB = [('red', 'u1'), ('green', 'u1'), ('blue', 'u1')]
MIN_FOCAL, MAX_ENTRY = 1e-3, 1e8  # pixels: the bounds of check_intrinsics that keep back-projected points finite


def check_intrinsics(intrinsics, name: str = 'intrinsics') -> np.ndarray:
    """float64 3x3 camera matrix of ``intrinsics`` (3x3 nested lists or array) or ValueError naming ``name`` and
    what is wrong: not 3x3, not finite, fx or fy below ``MIN_FOCAL`` (zero or negative included), an entry above
    ``MAX_ENTRY``, or a bottom row other than [0, 0, 1] or K[1, 0] != 0."""
    try:
        matrix = np.asarray(intrinsics, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: not a 3x3 matrix of numbers ({err})") from err
    if matrix.shape != (3, 3):
        raise ValueError(f"{name} has shape {matrix.shape}; a camera matrix is 3x3 "
                         f"[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} holds non-finite values: {matrix.tolist()}")
    if matrix[0, 0] <= 0 or matrix[1, 1] <= 0:
        raise ValueError(f"{name}: the focal lengths fx = {matrix[0, 0]:g}, fy = {matrix[1, 1]:g} (pixels) must be "
                         f"positive")
    if min(matrix[0, 0], matrix[1, 1]) < MIN_FOCAL:
        raise ValueError(f"{name}: the focal lengths fx = {matrix[0, 0]:g}, fy = {matrix[1, 1]:g} (pixels) must be "
                         f"at least {MIN_FOCAL:g}: a smaller one is a field of view of 180 degrees less a hair, and "
                         f"back-projection would give non-finite points")
    if np.abs(matrix[:2]).max() > MAX_ENTRY:
        raise ValueError(f"{name}: the value {np.abs(matrix[:2]).max():g} is above {MAX_ENTRY:g} pixels, more "
                         f"than any image's size: a matrix in other units, or a damaged file? Got {matrix.tolist()}")
    if matrix[1, 0] != 0 or not np.array_equal(matrix[2], [0.0, 0.0, 1.0]):
        raise ValueError(f"{name} is not a pinhole camera matrix: K[1, 0] must be 0 and the last row [0, 0, 1], "
                         f"got {matrix.tolist()}")
    return matrix


def scale_intrinsics(intrinsics, image_size, size) -> np.ndarray:
    """``intrinsics`` of images of ``image_size`` (w, h) for images of ``size`` (w', h'): the module docstring's
    size rule (identity when the sizes are equal)."""
    matrix = check_intrinsics(intrinsics)
    (w, h), (w2, h2) = image_size, size
    if min(w, h, w2, h2) <= 0:
        raise ValueError(f"image sizes must be positive, got {tuple(image_size)} -> {tuple(size)}")
    if (w, h) == (w2, h2):
        return matrix
    rx, ry = w2 / w, h2 / h
    scaled = matrix.copy()
    scaled[0, :2] *= rx
    scaled[1, 1] *= ry
    scaled[0, 2] = (matrix[0, 2] + 0.5) * rx - 0.5
    scaled[1, 2] = (matrix[1, 2] + 0.5) * ry - 0.5
    return scaled


def back_project(depth: np.ndarray, intrinsics, colours: np.ndarray | None = None, image_size=None):
    """Points 'n 3' (float32, camera frame, the depth's unit) of the valid pixels of ``depth`` 'h w' (finite and
    > 0; row-major order) and their colours 'n 3' (uint8, from ``colours`` 'h w 3'; None without). ``image_size``:
    the (w, h) the intrinsics belong to (default: the depth map's own size); see the module docstring."""
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise ValueError(f"depth map has shape {depth.shape}; expected 'h w'")
    h, w = depth.shape
    matrix = scale_intrinsics(intrinsics, image_size or (w, h), (w, h))
    if colours is not None and (colours.shape[:2] != depth.shape or colours.ndim != 3 or colours.shape[2] != 3):
        raise ValueError(f"colours of shape {colours.shape} do not fit the depth map 'h w' = {depth.shape}: "
                         f"expected 'h w 3'")
    valid = np.isfinite(depth) & (depth > 0)
    v, u = np.nonzero(valid)
    z = depth[valid].astype(np.float64)
    rays = np.linalg.solve(matrix, np.stack([u, v, np.ones_like(u)]).astype(np.float64))  # '3 n', z = 1
    points = (rays * z).T.astype(np.float32)
    if not np.isfinite(points).all():
        raise ValueError(f"back-projection with the camera matrix {matrix.tolist()} gives non-finite points for "
                         f"depths up to {z.max():g}: is the depth in metres and the matrix in pixels?")
    points[:, 2] = depth[valid]  # exactly the stored depth
    return points, (None if colours is None else np.ascontiguousarray(colours[valid], dtype=np.uint8))


def project(points: np.ndarray, intrinsics, size, image_size=None) -> np.ndarray:
    """float32 depth map 'h w' (``size`` = (w, h)) of ``points`` 'n 3': each point with z > 0 goes to the nearest
    pixel centre of ``K [x, y, z] / z``; points outside the image are dropped; where several land on a pixel the
    nearest (smallest z) wins; pixels no point reaches are 0. ``image_size`` as in :func:`back_project`."""
    w, h = size
    matrix = scale_intrinsics(intrinsics, image_size or (w, h), (w, h))
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    points = points[points[:, 2] > 0]
    pixels = matrix @ points.T
    u, v = (np.rint(pixels[i] / pixels[2]).astype(np.int64) for i in (0, 1))
    inside = (u >= 0) & (u < w) & (v >= 0) & (v < h)
    depth = np.full(h * w, np.inf)
    np.minimum.at(depth, v[inside] * w + u[inside], points[inside, 2])
    depth[np.isinf(depth)] = 0.0
    return depth.reshape(h, w).astype(np.float32)


def write_ply(path, points: np.ndarray, colours: np.ndarray | None = None) -> Path:
    """Write ``points`` 'n 3' (and ``colours`` 'n 3' uint8) as a binary little-endian PLY; returns the path."""
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points have shape {points.shape}; expected 'n 3'")
    fields = XYZ + (RGB if colours is not None else [])
    vertices = np.empty(len(points), dtype=fields)
    for i, axis in enumerate('xyz'):
        vertices[axis] = points[:, i]
    if colours is not None:
        colours = np.asarray(colours)
        if colours.shape != points.shape or colours.dtype != np.uint8:
            raise ValueError(f"colours are a {colours.dtype} array of shape {colours.shape}; expected uint8 "
                             f"'n 3' with n = {len(points)}")
        for i, channel in enumerate(('red', 'green', 'blue')):
            vertices[channel] = colours[:, i]
    types = {'<f4': 'float', 'u1': 'uchar'}
    header = ['ply', 'format binary_little_endian 1.0', f'element vertex {len(points)}']
    header += [f'property {types[t]} {n}' for n, t in fields] + ['end_header']
    path = Path(path)
    with open(path, 'wb') as f:
        f.write(('\n'.join(header) + '\n').encode('ascii'))
        f.write(vertices.tobytes())
    return path


def read_ply(path) -> tuple[np.ndarray, np.ndarray | None]:
    """Points 'n 3' float32 and colours 'n 3' uint8 (None when the file has none) of a PLY as :func:`write_ply`
    writes it (binary little-endian, one vertex element of float x, y, z and optional uchar red, green, blue);
    ValueError naming the file for anything else."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PLY file {path} does not exist")
    data = path.read_bytes()
    end = data.find(b'end_header\n')
    if not data.startswith(b'ply\n') or end < 0:
        raise ValueError(f"{path} is not a PLY file (no 'ply' ... 'end_header' header)")
    lines = data[:end].decode('ascii', errors='replace').splitlines()[1:]
    names = {'float': '<f4', 'float32': '<f4', 'uchar': 'u1', 'uint8': 'u1'}
    fields, count = [], None
    for line in lines:
        words = line.split()
        if not words or words[0] in ('comment', 'obj_info'):
            continue
        if words[0] == 'format' and words[1:] != ['binary_little_endian', '1.0']:
            raise ValueError(f"{path} is in PLY format {' '.join(words[1:])}; this reader reads "
                             f"binary_little_endian 1.0 only (as write_ply writes)")
        elif words[0] == 'element':
            if len(words) != 3:
                raise ValueError(f"{path}: header line {line.strip()!r} is not 'element <name> <count>'")
            if words[1] != 'vertex' or count is not None:
                raise ValueError(f"{path} has element {words[1]!r}; this reader reads one 'vertex' element only")
            if not words[2].isdigit():
                raise ValueError(f"{path}: the vertex count {words[2]!r} (header line {line.strip()!r}) is not a "
                                 f"non-negative integer")
            count = int(words[2])
        elif words[0] == 'property':
            if len(words) != 3 or words[1] not in names:
                raise ValueError(f"{path}: property {' '.join(words[1:])!r} is not read here (float x, y, z and "
                                 f"uchar red, green, blue only)")
            fields.append((words[2], names[words[1]]))
    if fields not in (XYZ, XYZ + RGB) or count is None:
        raise ValueError(f"{path} has vertex properties {[n for n, _ in fields]}; expected x, y, z (float) and "
                         f"optionally red, green, blue (uchar)")
    body = data[end + len(b'end_header\n'):]
    dtype = np.dtype(fields)
    if len(body) != count * dtype.itemsize:
        raise ValueError(f"{path} holds {len(body)} bytes of vertex data; {count} vertices need "
                         f"{count * dtype.itemsize} (a truncated file?)")
    vertices = np.frombuffer(body, dtype=dtype)
    points = np.stack([vertices[a] for a in 'xyz'], axis=1)
    colours = np.stack([vertices[c] for c in ('red', 'green', 'blue')], axis=1) if len(fields) == 6 else None
    return points, colours
