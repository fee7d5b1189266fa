"""Loading transforms: the image (RGB) and its dense annotations (label map, depth map in metres).

Both keep arrays that an in-memory dataset already put in the data info ('img', 'gt_seg_map',
'gt_depth'), so a pipeline works the same for files and for generated data.
"""
from __future__ import annotations

import cv2
import numpy as np

from ..io.depth import depth_in_metres, read_mask, read_raw_depth
from ..io.images import ImageError, check_rgb, decode, read_rgb
from ..io.labels import IGNORE_INDEX
from ..registry import TRANSFORMS
from .base import DenseTransform

#: Defaults when the data info does not say how depth is encoded: uint16 millimetres, 0 = no measurement.
DEFAULT_DEPTH_SCALE = 1000.0
DEFAULT_DEPTH_INVALID = (0,)
#: The label that losses and metrics skip (mmseg's convention); padding and void classes are mapped to it.


def _add_field(results: dict, key: str) -> None:
    fields = results.setdefault('seg_fields', [])
    if key not in fields:
        fields.append(key)


def read_unchanged(path, what: str) -> np.ndarray:
    """A file decoded with cv2.IMREAD_UNCHANGED (bit depth and channels as stored); errors name the file."""
    return decode(path, cv2.IMREAD_UNCHANGED, what)


def _check_same_size(array: np.ndarray, path, results: dict, what: str) -> None:
    """A label or depth map must have the size of the image as loaded ('ori_shape'); ``path`` None = the
    map came in the data info."""
    shape = results.get('ori_shape')
    if shape is not None and tuple(array.shape[:2]) != tuple(shape[:2]):
        (h, w), (img_h, img_w) = array.shape[:2], shape[:2]
        source = f"{what} {path}" if path is not None else f"in-memory {what} (from the data info)"
        raise ImageError(f"{source} is {h}x{w} (h x w) but its image {results.get('img_path')} is "
                         f"{img_h}x{img_w}: they must have the same size; check that the two files belong "
                         f"together (same stem) and that neither was resized")


def _as_8bit_labels(raw: np.ndarray, path) -> np.ndarray:
    """8-bit label maps as they are; 16-bit ones when every value fits in 0..255."""
    if raw.dtype == np.uint16 and raw.max(initial=0) <= 255:
        return raw.astype(np.uint8)
    if raw.dtype != np.uint8:
        largest = f" (largest value {raw.max()})" if raw.dtype.kind in 'iu' else ''
        raise ImageError(f"label map {path} is {raw.dtype}{largest}; a label map holds class ids 0..255 in an "
                         f"8-bit PNG (or a 16-bit one whose values fit in 0..255)")
    return raw


def _check_label_range(labels: np.ndarray, num_classes: int | None, path) -> None:
    """Every encoded label is a class (0..num_classes-1) or the ignore index; ``num_classes`` None = unknown."""
    if num_classes is None:
        return
    present = np.flatnonzero(np.bincount(labels.ravel(), minlength=256))
    bad = present[(present >= num_classes) & (present != IGNORE_INDEX)]
    if bad.size:
        raise ImageError(f"label map {path} has values {bad.tolist()} (after the dataset's label_map and "
                         f"reduce_zero_label) outside the {num_classes} classes 0..{num_classes - 1} that are not "
                         f"the ignore index {IGNORE_INDEX}; map them with the dataset's label_map (e.g. "
                         f"{{{int(bad[0])}: {IGNORE_INDEX}}} to ignore them) or give the dataset all its classes")


def encode_labels(raw: np.ndarray, label_map: dict | None, reduce_zero_label: bool) -> np.ndarray:
    """mmseg's label encoding of a raw 'h w' uint8 label map: ``label_map`` first, then ``reduce_zero_label``
    (0 -> 255, k -> k - 1, 255 stays 255)."""
    labels = raw.copy()
    if label_map:
        for old, new in label_map.items():
            if not 0 <= new <= 255:
                raise ValueError(f"label_map sends {old} to {new}, outside the uint8 range 0..255")
            labels[raw == old] = new
    if reduce_zero_label:
        labels[labels == 0] = IGNORE_INDEX
        labels = labels - 1  # 255 -> 254, so that ...
        labels[labels == IGNORE_INDEX - 1] = IGNORE_INDEX  # ... ignore stays ignore
    return labels


@TRANSFORMS.register_module()
class LoadImage(DenseTransform):
    """Read ``results['img_path']`` as 'h w 3' uint8 RGB (cv2.IMREAD_COLOR, BGR -> RGB).

    Sets 'img', 'ori_shape' and 'img_shape' (both ``(h, w)``). An 'img' already in ``results`` (in-memory
    datasets) is kept after checking it is 'h w 3' uint8.
    """

    def transform(self, results: dict) -> dict:
        if results.get('img') is not None:
            img = check_rgb(results['img'], f"in-memory image {results.get('img_path', '')}".rstrip())
        elif results.get('img_path') is not None:
            img = read_rgb(results['img_path'])  # errors name the file
        else:
            raise KeyError("LoadImage needs results['img_path'] (or an in-memory results['img']); "
                           "the dataset's data info has neither")
        results['img'] = img
        results['ori_shape'] = results['img_shape'] = img.shape[:2]
        return results


@TRANSFORMS.register_module()
class LoadAnnotations(DenseTransform):
    """Load the label map (``seg``) and/or the depth map (``depth``) named by the data info.

    Label map: 'seg_map_path' read with cv2.IMREAD_UNCHANGED; it must be a single-channel 8-bit index image
    (pixel value = class id; 16-bit when its values fit in 0..255). The data info's 'label_map' (old -> new) is
    applied, then 'reduce_zero_label', exactly as mmseg. With 'num_classes' in the data info (datasets add it),
    a value that is neither a class nor 255 (ignore) is an error naming the file. Result: 'gt_seg_map' uint8 'h w'.

    Depth map: 'depth_path' read by :func:`heads.io.depth.read_raw_depth` (a single-channel uint16 or uint8 PNG,
    or a real 'h w' .npy array); raw values in 'depth_invalid' (and non-finite ones) become 0, the rest are divided
    by 'depth_scale' (raw / depth_scale = metres). With 'depth_mask_path' (a PNG, non-zero = valid), pixels outside
    the mask become 0 too. Result: 'gt_depth' float32 'h w' in metres, 0 = invalid. Without those keys:
    millimetres, 0 invalid.

    Maps whose size differs from the image as loaded ('ori_shape') are an error. 'gt_seg_map'/'gt_depth'
    already in ``results`` (in-memory datasets) are kept as they are (already encoded). Both keys are added
    to 'seg_fields'.
    """

    def __init__(self, seg: bool = True, depth: bool = False):
        if not (seg or depth):
            raise ValueError("LoadAnnotations(seg=False, depth=False) loads nothing; enable seg or depth")
        self.seg, self.depth = seg, depth

    def transform(self, results: dict) -> dict:
        wanted = [('gt_seg_map', self._load_seg, 'label map')] * self.seg + \
                 [('gt_depth', self._load_depth, 'depth map')] * self.depth
        for field, load, what in wanted:
            if results.get(field) is None:
                results[field] = load(results)
            else:
                _check_same_size(results[field], None, results, what)
            _add_field(results, field)
        return results

    @staticmethod
    def _path(results: dict, key: str, option: str, field: str, what: str) -> str:
        """The annotation file ``results[key]``; its absence is an error saying what to do."""
        path = results.get(key)
        if path is None:
            raise KeyError(f"LoadAnnotations({option}=True) needs results['{key}'] (or an in-memory '{field}'); use "
                           f"{option}=False for a dataset without {what}s")
        return path

    @classmethod
    def _load_seg(cls, results: dict) -> np.ndarray:
        path = cls._path(results, 'seg_map_path', 'seg', 'gt_seg_map', 'label map')
        raw = read_unchanged(path, 'label map')
        if raw.ndim == 3:
            raise ImageError(f"label map {path} has {raw.shape[2]} channels: a label map must be a "
                             f"single-channel index PNG (8-bit grayscale, pixel value = class id). Convert "
                             f"colour-coded labels to class indices (a palette PNG must be saved as "
                             f"grayscale indices, since OpenCV expands palettes to colours)")
        raw = _as_8bit_labels(raw, path)
        _check_same_size(raw, path, results, 'label map')
        labels = encode_labels(raw, results.get('label_map'), bool(results.get('reduce_zero_label', False)))
        _check_label_range(labels, results.get('num_classes'), path)
        return labels

    @classmethod
    def _load_depth(cls, results: dict) -> np.ndarray:
        path = cls._path(results, 'depth_path', 'depth', 'gt_depth', 'depth map')
        raw = read_raw_depth(path)  # PNG or .npy; errors name the file
        _check_same_size(raw, path, results, 'depth map')
        depth = depth_in_metres(raw, results.get('depth_scale', DEFAULT_DEPTH_SCALE),
                                results.get('depth_invalid', DEFAULT_DEPTH_INVALID))
        mask_path = results.get('depth_mask_path')
        if mask_path is not None:
            valid = read_mask(mask_path)
            _check_same_size(valid, mask_path, results, 'validity mask')
            depth[~valid] = 0.0
        return depth
