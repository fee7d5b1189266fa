"""CamVid with panoptic and instance targets: its label maps split into segments, thing classes by connected
component (the same components as the detection export, :func:`~heads.datasets.instances_from_labels.components`).

CamVid comes without instance annotations, so an instance is an 8-connected region of a thing class: two cars that
touch are one instance, and a car cut in two by a pole is two. Regions smaller than ``min_area`` pixels (label
noise, far objects) become one crowd segment per class: no instance target, ignored in ``gt_sem_seg``, and
predictions on them are not counted as false positives by the panoptic metric. Every stuff class present is one
segment; void (label 11) is void.
"""
from __future__ import annotations

import numpy as np

from ..registry import DATASETS
from ..transforms.loading import LoadAnnotations
from ..transforms.panoptic import semantic_from_segments
from .camvid import CAMVID_CLASSES, CamVidDataset
from .instances_from_labels import components

#: CamVid's countable classes (the others are stuff).
CAMVID_THING_CLASSES = ('Car', 'Pedestrian', 'Bicyclist')


def segments_from_labels(labels: np.ndarray, thing_labels, min_area: int,
                         ignore_index: int = 255) -> tuple[np.ndarray, list[dict]]:
    """An 'h w' label map -> ('h w' int32 segment map, 0 = void, and its segments ``dict(label, isthing, iscrowd)``):
    each stuff class present is one segment, each component of a thing class with at least ``min_area`` pixels one
    instance, the rest of a thing class one crowd segment."""
    segment_map = np.zeros(labels.shape, np.int32)
    segments = []

    def add(mask, label, isthing, iscrowd):
        segments.append(dict(label=int(label), isthing=isthing, iscrowd=iscrowd))
        segment_map[mask] = len(segments)

    for label in np.unique(labels):
        if label == ignore_index:
            continue
        if label not in thing_labels:
            add(labels == label, label, False, False)
            continue
        rest = labels == label
        for mask, _, _ in components(labels, int(label), min_area):
            add(mask, label, True, False)
            rest &= ~mask
        if rest.any():
            add(rest, label, True, True)
    return segment_map, segments


@DATASETS.register_module()
class CamVidPanopticDataset(CamVidDataset):
    """:class:`CamVidDataset` whose samples carry a panoptic annotation (module docstring): use
    :class:`~heads.transforms.LoadPanopticAnnotations` in place of LoadAnnotations. ``thing_classes``: the class
    names split into instances; ``min_area``: the least pixels of an instance."""

    def __init__(self, data_root: str, split: str = 'train', thing_classes=CAMVID_THING_CLASSES,
                 min_area: int = 64, **kwargs):
        unknown = [name for name in thing_classes if name not in CAMVID_CLASSES]
        if unknown:
            raise ValueError(f"thing_classes {unknown} are not CamVid classes; choose from {list(CAMVID_CLASSES)}")
        self.thing_labels = tuple(CAMVID_CLASSES.index(name) for name in thing_classes)
        self.min_area = int(min_area)
        metainfo = dict(kwargs.pop('metainfo', None) or {}, thing_classes=tuple(thing_classes),
                        stuff_classes=tuple(n for n in CAMVID_CLASSES if n not in thing_classes))
        super().__init__(data_root=data_root, split=split, metainfo=metainfo, **kwargs)

    def get_data_info(self, idx: int) -> dict:
        """The data info with the label map read and split: 'gt_segment_map', 'segments' and 'gt_seg_map'."""
        info = super().get_data_info(idx)
        labels = LoadAnnotations._load_seg(info)  # encoded (void -> 255) and range-checked; errors name the file
        info['gt_segment_map'], info['segments'] = segments_from_labels(labels, self.thing_labels, self.min_area)
        info['gt_seg_map'] = semantic_from_segments(info['gt_segment_map'], info['segments'])
        return info
