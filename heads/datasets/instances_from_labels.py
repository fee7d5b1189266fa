"""COCO-format detection sets from semantic label maps: each connected component of a chosen class is an
instance (box + mask). Built for CamVid (Car, Pedestrian), whose images come without instance annotations."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..transforms.loading import read_unchanged
from .base import list_files
from .coco import encode_mask


def components(labels: np.ndarray, label: int, min_area: int) -> list[tuple[np.ndarray, list[int], int]]:
    """(mask 'h w' bool, bbox [x, y, w, h], area) of each 8-connected region of ``label`` in ``labels`` with at
    least ``min_area`` pixels."""
    count, regions, stats, _ = cv2.connectedComponentsWithStats((labels == label).astype(np.uint8), connectivity=8)
    found = []
    for i in range(1, count):
        x, y, w, h, area = (int(v) for v in stats[i])
        if area >= min_area:
            mask = np.zeros(labels.shape, dtype=bool)
            mask[y:y + h, x:x + w] = regions[y:y + h, x:x + w] == i
            found.append((mask, [x, y, w, h], area))
    return found


def labels_to_coco(image_dir, label_dir, classes: dict[str, int], min_area: int = 64,
                   image_root=None) -> dict:
    """A COCO instances dict for the images of ``image_dir`` (*.jpg) with label maps in ``label_dir`` (*.png,
    same stems): ``classes`` maps each category name to its label value; categories are numbered from 1 in that
    order. ``file_name`` is relative to ``image_root`` (default ``image_dir``). Images without any instance are
    listed too (with no annotations), as COCO val sets do."""
    images = list_files(image_dir, '.jpg', 'image', '<stem>.jpg with a <stem>.png label map beside in label_dir')
    label_files = list_files(label_dir, '.png', 'label', '<stem>.png for each image')
    missing = sorted(set(images) - set(label_files))
    if missing:
        raise FileNotFoundError(f"{len(missing)} images of {image_dir} have no label map in {label_dir} "
                                f"(first: {missing[0]}.png)")
    root = Path(image_root or image_dir)
    categories = [{'id': i + 1, 'name': name, 'supercategory': 'object'} for i, name in enumerate(classes)]
    coco = {'images': [], 'annotations': [], 'categories': categories}
    for image_id, stem in enumerate(images, start=1):
        labels = read_unchanged(label_files[stem], 'label map')
        if labels.ndim != 2:
            raise ValueError(f"label map {label_files[stem]} has {labels.shape[2]} channels; "
                             f"expected one (label values)")
        height, width = labels.shape[:2]
        coco['images'].append({'id': image_id, 'file_name': str(images[stem].relative_to(root)),
                               'height': height, 'width': width})
        for category_id, label in enumerate(classes.values(), start=1):
            for mask, bbox, area in components(labels, label, min_area):
                coco['annotations'].append({'id': len(coco['annotations']) + 1, 'image_id': image_id,
                                            'category_id': category_id, 'iscrowd': 0, 'area': area, 'bbox': bbox,
                                            'segmentation': encode_mask(mask)})
    return coco
