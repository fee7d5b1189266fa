"""Writing a model's predictions to files (what ``tools/infer.py`` writes), and where: output paths that overwrite
no input and no other output.

For an input image the outputs share a *base*, ``<out>/<relative path without suffix>`` (:func:`output_bases`):
the picture ``<base>.png`` and the raw prediction:

- class ids (:func:`write_labels`): ``<base>_pred.png``, 8-bit, 255 = none;
- a panoptic map (:func:`write_panoptic`), as the COCO panoptic format stores one: ``<base>_pred.png``, an RGB PNG
  of segment ids, ``id = R + 256 * G + 256**2 * B`` (panopticapi's ``rgb2id``; 0 = no segment), and
  ``<base>_pred.json`` holding ``segments_info`` (``id``, ``category_id``, ``iscrowd``, ``area``, ``bbox`` [x, y,
  width, height], as panopticapi reads them) and the ``categories`` (``id``, ``name``, ``isthing``). A segment's id
  is its packed value plus one, ``label + instance * INSTANCE_OFFSET + 1``; its ``category_id`` is the class index
  ``label`` (the model's classes, counted from 0);
- depth (:func:`write_depth`), in the formats asked: ``<base>_pred.npy``, float32 'h w' as predicted (metres for a
  metric model, the relative inverse depth of a relative one; nothing clipped, read back by
  :func:`heads.io.depth.read_raw_depth` with ``depth_scale=1``), and ``<base>_pred.png``, 16-bit: metric depth in
  millimetres (0 = none; 1..65534, so up to 65.534 m: 65535 is 7-Scenes' invalid marker, and a depth beyond is
  written as 0 with a warning naming the file and the count), a relative one scaled to 0..65535 by its maximum.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import cv2
import numpy as np

from .labels import IGNORE_INDEX, INSTANCE_OFFSET

#: What an input's base may become (the picture, the raw predictions, the point cloud): checked for collisions.
OUTPUT_SUFFIXES = ('.png', '_pred.png', '_pred.npy', '_pred.json', '.ply')
#: The largest depth in millimetres a 16-bit PNG holds here (65535 is 7-Scenes' "no measurement").
MAX_MILLIMETRES = 65534
DEPTH_FORMATS = ('png', 'npy')


def output_bases(images, out) -> dict[Path, Path]:
    """``{image: base}``: each image's path relative to the common folder of all the images, without its suffix,
    under ``out`` (so that ``a/001.png`` and ``b/001.png`` keep apart). ValueError, before anything is written, when
    an output (:data:`OUTPUT_SUFFIXES`) would overwrite an input or another input's output."""
    images = list(images)
    if not images:
        return {}
    resolved = [Path(p).resolve() for p in images]
    root = Path(os.path.commonpath([p.parent for p in resolved]))
    out = Path(out)
    inputs = {p: image for p, image in zip(resolved, images)}
    bases, written = {}, {}
    for image, path in zip(images, resolved):
        base = out / path.relative_to(root).with_suffix('')
        for suffix in OUTPUT_SUFFIXES:
            target = Path(f'{base}{suffix}')
            key = target.resolve()
            if key in inputs:
                raise ValueError(f"the output {target} of input {image} would overwrite the input {inputs[key]}: "
                                 f"give --out a folder apart from the images (e.g. a new one)")
            if key in written:
                raise ValueError(f"inputs {written[key]} and {image} would both write {target}: rename one, or "
                                 f"predict them in separate runs")
            written[key] = image
        bases[image] = base
    return bases


def write_labels(base, labels: np.ndarray) -> Path:
    """``<base>_pred.png``: 8-bit class ids, 255 = none (values outside 0..254 too)."""
    raw = np.where((labels >= 0) & (labels < IGNORE_INDEX), labels, IGNORE_INDEX).astype(np.uint8)
    return _imwrite(Path(f'{base}_pred.png'), raw)


def write_depth(base, depth: np.ndarray, relative: bool, formats=DEPTH_FORMATS) -> list[Path]:
    """The depth map in ``formats`` (module docstring); a 16-bit PNG that cannot hold a metric depth warns."""
    unknown = [f for f in formats if f not in DEPTH_FORMATS]
    if unknown or not formats:
        raise ValueError(f"depth formats must be some of {DEPTH_FORMATS}, got {list(formats)}")
    written = []
    if 'npy' in formats:
        path = Path(f'{base}_pred.npy')
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, np.asarray(depth, dtype=np.float32))
        written.append(path)
    if 'png' in formats:
        path = Path(f'{base}_pred.png')
        if relative:
            finite = np.nan_to_num(depth, nan=0.0, posinf=0.0, neginf=0.0)
            raw = np.clip(finite / max(float(finite.max()), 1e-12) * 65535, 0, 65535).astype(np.uint16)
        else:
            raw, beyond = millimetres(depth)
            if beyond:
                deepest = float(np.max(depth[np.isfinite(depth)]))
                kept = (f'their values are in {base}_pred.npy' if 'npy' in formats else
                        'add npy to --depth-format to keep them (float32 metres)')
                warnings.warn(f"{path}: {beyond} pixels deeper than {MAX_MILLIMETRES / 1000:g} m (up to "
                              f"{deepest:.3f} m) do not fit a 16-bit PNG of millimetres and are "
                              f"written as 0 (none); {kept}", stacklevel=2)
        written.append(_imwrite(path, raw))
    return written


def millimetres(depth: np.ndarray) -> tuple[np.ndarray, int]:
    """(uint16 millimetres, 0 where none or where the depth is beyond :data:`MAX_MILLIMETRES`; the count of the
    latter)."""
    depth = np.asarray(depth, dtype=np.float32)
    finite = np.isfinite(depth)
    mm = np.where(finite, np.round(np.where(finite, depth, 0) * np.float32(1000)), 0)
    beyond = finite & (mm > MAX_MILLIMETRES)
    return np.where((mm > 0) & ~beyond, mm, 0).astype(np.uint16), int(beyond.sum())


def id2rgb(ids: np.ndarray) -> np.ndarray:
    """'h w' segment ids (0 .. 256**3 - 1) -> 'h w 3' uint8 RGB, ``id = R + 256 * G + 256**2 * B`` (panopticapi)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= 256 ** 3):
        raise ValueError(f"panoptic segment ids must be in 0..{256 ** 3 - 1} to fit an RGB PNG, got "
                         f"{int(ids.min())}..{int(ids.max())}")
    return np.stack([ids % 256, ids // 256 % 256, ids // 256 ** 2], axis=-1).astype(np.uint8)


def rgb2id(rgb: np.ndarray) -> np.ndarray:
    """The inverse of :func:`id2rgb`: 'h w 3' RGB -> 'h w' int64 ids."""
    rgb = np.asarray(rgb, dtype=np.int64)
    return rgb[..., 0] + 256 * rgb[..., 1] + 256 ** 2 * rgb[..., 2]


def panoptic_segments(panoptic: np.ndarray, num_classes: int) -> tuple[np.ndarray, list[dict]]:
    """A packed map ('h w', ``label + instance * INSTANCE_OFFSET``, ``num_classes`` = none) -> (segment ids 'h w'
    int64, value + 1 and 0 for none; COCO ``segments_info``, ascending ids)."""
    panoptic = np.asarray(panoptic, dtype=np.int64)
    void = (panoptic == num_classes) | (panoptic < 0)
    ids = np.where(void, 0, panoptic + 1)
    segments = []
    for value in np.unique(ids):
        if value == 0:
            continue
        mask = ids == value
        rows, cols = np.nonzero(mask.any(1))[0], np.nonzero(mask.any(0))[0]
        segments.append(dict(id=int(value), category_id=int((value - 1) % INSTANCE_OFFSET), iscrowd=0,
                             area=int(mask.sum()), bbox=[int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1),
                                                         int(rows[-1] - rows[0] + 1)]))
    return ids, segments


def write_panoptic(base, panoptic: np.ndarray, num_classes: int, classes=(), stuff_classes=()) -> dict:
    """``<base>_pred.png`` (RGB segment ids) and ``<base>_pred.json`` (module docstring); returns the JSON's
    content, a COCO panoptic annotation (``file_name``, ``segments_info``) with ``categories``."""
    ids, segments = panoptic_segments(panoptic, num_classes)
    png = Path(f'{base}_pred.png')
    _imwrite(png, cv2.cvtColor(id2rgb(ids), cv2.COLOR_RGB2BGR))
    stuff = {int(c) for c in stuff_classes or ()}
    categories = [dict(id=c, name=str(classes[c]) if c < len(classes) else f'class {c}', isthing=int(c not in stuff))
                  for c in range(num_classes)]
    annotation = dict(file_name=png.name, image_id=Path(base).name, segments_info=segments, categories=categories)
    Path(f'{base}_pred.json').write_text(json.dumps(annotation, indent=1) + '\n')
    return annotation


def _imwrite(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), array):
        raise ValueError(f"could not write {path}")
    return path
