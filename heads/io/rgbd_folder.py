"""The one listing of an RGB-D folder: which frames it holds and what is wrong with it, used both by
:class:`heads.datasets.RGBDFolderDataset` (which refuses a folder with any error) and by ``tools/check_dataset.py``
(which names every error and note), so that the two never disagree about a folder.

Layout (Microsoft 7-Scenes'): ``rgb/<stem>.jpg|png``, ``depth/<stem>.png|npy`` with the same stems (subfolders and
symbolic links to folders followed), optional ``mask/<stem>.png`` (non-zero = valid), optional intrinsics (one
``camera-intrinsics.txt`` or ``intrinsics/<stem>.txt`` per frame). Suffixes match in any case (``a.PNG`` is a PNG).

Errors (each an exception whose message is one line naming its file): a missing or empty folder, a list file that
is missing, empty or names a frame without its files, a frame stored twice (``a.png`` beside ``a.npy``: which one
is meant cannot be told), an image without a depth map, OpenEXR depth, unreadable or invalid intrinsics. Notes
(the dataset leaves these files out): a depth map or mask without an image, a frame without its per-frame
intrinsics file. Reading the pixels (sizes, bit depth, valid depth) is the check's, frame by frame: see
:func:`frame_problems`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .depth import (
    DEPTH_SUFFIXES,
    INTRINSICS_DIR,
    RGB_SUFFIXES,
    SHARED_INTRINSICS,
    check_depth_suffix,
    read_intrinsics,
    stems_and_clashes,
)
from .images import ImageError


@dataclass
class Frame:
    """One frame: its stem (relative path without suffix), image, depth map, validity mask and 3x3 intrinsics."""
    stem: str
    rgb: Path
    depth: Path
    mask: Path | None = None
    intrinsics: list | None = None


@dataclass
class Listing:
    """The frames of a folder, the errors that make it unusable and the notes on files left out."""
    frames: list[Frame] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    intrinsics: str | None = None

    def raise_first(self, layout: str) -> None:
        """Raise the first error (its own type), saying how many more there are and the expected ``layout``."""
        if not self.errors:
            return
        first, more = self.errors[0], len(self.errors) - 1
        extra = f" (and {more} more problem(s))" if more else ''
        raise type(first)(f"{first}{extra}; expected the layout {layout} (tools/check_dataset.py names every "
                          f"problem)") from first


def _ambiguous(what: str, stem: str, paths) -> ImageError:
    return ImageError(f"ambiguous {what}: frame '{stem}' has {len(paths)} files, {' and '.join(map(str, paths))}: "
                      f"which one is meant cannot be told; remove or rename all but one")


def list_rgbd_folder(rgb_dir, depth_dir, mask_dir=None, rgb_suffix: str | None = None,
                     depth_suffix: str | None = None, list_file=None, root=None,
                     intrinsics: str | None = 'auto') -> Listing:
    """The :class:`Listing` of the folders ``rgb_dir``, ``depth_dir`` and ``mask_dir`` (None: no masks).

    ``rgb_suffix``/``depth_suffix`` None accept any of :data:`~heads.io.depth.RGB_SUFFIXES` / ``.png``, ``.npy``
    (and ``.exr``, to refuse it by name). ``list_file`` (one stem per line, blank lines ignored) picks and orders the
    frames; without it every image is a frame. ``intrinsics``: 'auto' reads ``root/camera-intrinsics.txt`` if it
    exists, else ``root/intrinsics/<stem>.txt`` per frame if that folder exists; a path names one shared file
    (relative: to ``root`` unless it exists as given); None reads none."""
    out = Listing()
    rgb_dir, depth_dir = Path(rgb_dir), Path(depth_dir)
    names = _listed(Path(list_file), out) if list_file is not None else None
    for folder, what in ((rgb_dir, 'image'), (depth_dir, 'depth map')):
        if not folder.is_dir():
            out.errors.append(FileNotFoundError(f"missing folder: {what} folder {folder} does not exist"))
    rgb_choices = (rgb_suffix,) if rgb_suffix else RGB_SUFFIXES
    depth_choices = (depth_suffix,) if depth_suffix else (*DEPTH_SUFFIXES, '.exr')
    images, image_clashes = stems_and_clashes(rgb_dir, rgb_choices)
    depths, depth_clashes = stems_and_clashes(depth_dir, depth_choices)
    masks, mask_clashes = stems_and_clashes(mask_dir, ('.png',)) if mask_dir is not None else ({}, {})
    out.counts = dict(images=len(images), depth_maps=len(depths), masks=len(masks))
    if rgb_dir.is_dir() and not images:
        out.errors.append(ValueError(f"no images: image folder {rgb_dir} holds no {'|'.join(rgb_choices)} file"))
    for what, clashes in (('image', image_clashes), ('depth map', depth_clashes), ('mask', mask_clashes)):
        out.errors += [_ambiguous(what, stem, paths) for stem, paths in clashes.items()]
    if names is not None:
        for stem in names:
            for found, folder, choices in ((images, rgb_dir, rgb_choices), (depths, depth_dir, depth_choices)):
                if stem not in found and folder.is_dir():
                    out.errors.append(FileNotFoundError(
                        f"frame '{stem}' listed in {list_file} has no file {folder / stem}{'|'.join(choices)}"))
        chosen = [stem for stem in names if stem in images and stem in depths]
    else:
        out.errors += [FileNotFoundError(f"image without depth: {images[stem]} (no {depth_dir / stem}"
                                         f"{'|'.join(c for c in depth_choices if c != '.exr')})")
                       for stem in images if stem not in depths and depth_dir.is_dir()]
        out.notes += [f"depth without image: {depths[stem]} (no {rgb_dir / stem}{'|'.join(rgb_choices)}; left out)"
                      for stem in depths if stem not in images]
        chosen = [stem for stem in images if stem in depths]
    out.notes += [f"mask without image: {masks[stem]} (left out)" for stem in masks if stem not in images]
    shared, per_frame = _intrinsics(root, intrinsics, out)
    for stem in chosen:
        try:
            check_depth_suffix(depths[stem])
        except ImageError as err:
            out.errors.append(ImageError(f"unreadable: {err}"))
            continue
        frame = Frame(stem, images[stem], depths[stem], masks.get(stem), shared)
        if per_frame is not None:
            frame.intrinsics = _per_frame_intrinsics(per_frame, frame, out)
        out.frames.append(frame)
    return out


def _listed(list_file: Path, out: Listing) -> list[str]:
    """The stems of ``list_file``; an error (and []) when it is missing or names none."""
    if not list_file.is_file():
        out.errors.append(FileNotFoundError(f"missing list file: frame list {list_file} does not exist"))
        return []
    names = [line.strip() for line in list_file.read_text().splitlines() if line.strip()]
    if not names:
        out.errors.append(ValueError(f"empty list file: frame list {list_file} names no frames; expected one stem "
                                     f"per line"))
    return names


def _intrinsics(root, setting, out: Listing):
    """(shared 3x3 matrix or None, {stem: file} of per-frame files or None); unreadable files become errors."""
    if setting is None:
        return None, None
    root = Path(root or '.')
    if setting == 'auto':
        path = root / SHARED_INTRINSICS
        if not path.is_file():
            if (root / INTRINSICS_DIR).is_dir():
                files, clashes = stems_and_clashes(root / INTRINSICS_DIR, ('.txt',))
                out.errors += [_ambiguous('intrinsics', stem, paths) for stem, paths in clashes.items()]
                out.intrinsics = f"per frame in {root / INTRINSICS_DIR}: {len(files)} files"
                return None, files
            return None, None
    else:
        path = Path(setting)
        path = path if path.is_absolute() or path.is_file() else root / path
    try:
        matrix = read_intrinsics(path)
    except (OSError, ValueError) as err:
        out.errors.append(ValueError(f"unreadable: {err}"))
        return None, None
    out.intrinsics = f"shared {path}: {matrix}"
    return matrix, None


def _per_frame_intrinsics(files: dict, frame: Frame, out: Listing):
    """The frame's matrix from its file among ``files``; a note when it has none, an error when unreadable."""
    path = files.get(frame.stem)
    if path is None:
        out.notes.append(f"frame without intrinsics: {frame.rgb} has no {frame.stem}.txt in the per-frame "
                         f"intrinsics folder (left without intrinsics)")
        return None
    try:
        return read_intrinsics(path)
    except (OSError, ValueError) as err:
        out.errors.append(ValueError(f"unreadable: {err}"))
        return None


def frame_problems(frame: Frame, depth_scale: float, depth_invalid, allow_8bit: bool = False):
    """(problems, depth in metres, valid pixels) of one frame's files, read as the dataset reads them: each problem
    a line naming its file (unreadable, sizes that differ, 8-bit depth unless ``allow_8bit``, no valid pixel);
    depth and valid are None when the frame cannot be read whole."""
    import cv2
    import numpy as np

    from .depth import depth_in_metres, read_mask, read_raw_depth
    from .images import decode
    problems: list[str] = []
    try:
        image = decode(frame.rgb, cv2.IMREAD_COLOR, 'image')
    except (OSError, ValueError) as err:
        problems.append(f"unreadable: {frame.rgb}: {err}")
        image = None
    try:
        raw = read_raw_depth(frame.depth)
    except (OSError, ValueError) as err:
        return [*problems, f"unreadable: {frame.depth}: {err}"], None, None
    if raw.dtype == np.uint8 and not allow_8bit:
        problems.append(f"8-bit depth: {frame.depth} is an 8-bit PNG; depth PNGs must be 16-bit (raw / "
                        f"depth_scale = metres; 8 bits hold only 256 levels, usually a visualisation)")
    if image is not None and raw.shape != image.shape[:2]:
        problems.append(f"size mismatch: {frame.depth} is {raw.shape[0]}x{raw.shape[1]} (h x w) but {frame.rgb} is "
                        f"{image.shape[0]}x{image.shape[1]}")
        return problems, None, None
    depth = depth_in_metres(raw, depth_scale, depth_invalid)
    valid = depth > 0
    if frame.mask is not None:
        try:
            mask = read_mask(frame.mask)
        except (OSError, ValueError) as err:
            return [*problems, f"unreadable: {frame.mask}: {err}"], None, None
        if mask.shape != depth.shape:
            problems.append(f"size mismatch: {frame.mask} is {mask.shape[0]}x{mask.shape[1]} (h x w) but "
                            f"{frame.depth} is {depth.shape[0]}x{depth.shape[1]}")
            return problems, None, None
        valid &= mask
    if not valid.any():
        masked = f", or masked out by {frame.mask}" if frame.mask is not None else ''
        problems.append(f"no valid depth: {frame.depth}: every pixel is invalid (raw values in depth_invalid "
                        f"{list(depth_invalid)}, non-finite or not above 0{masked}); the frame teaches nothing")
    return problems, depth, valid
