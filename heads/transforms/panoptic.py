"""Panoptic annotations in a pipeline: a segment map that the geometric transforms move with the image, and the
three targets of a mask head made from it when the sample is packed.

In the result dict a panoptic annotation is two things: 'gt_segment_map' ('h w' int32: 0 = void, k = the segment
``results['segments'][k - 1]``), a dense field that Resize / RandomCrop / RandomFlip / Pad move exactly like
'gt_seg_map' (nearest; Pad fills 0 = void), and 'segments', a list of ``dict(label, isthing, iscrowd)`` (label: the
contiguous class index 0..K-1). 'gt_seg_map' (uint8 'h w', the segments' labels, 255 on void and crowd pixels)
travels beside it, so RandomCrop's class balancing and the semantic metrics keep working.

:func:`panoptic_targets` turns the (transformed) pair into ``gt_instances`` and ``gt_panoptic_seg``;
:class:`~heads.transforms.PackDenseInputs` calls it.
"""
from __future__ import annotations

import numpy as np
import torch
from mmengine.structures import InstanceData, PixelData

from ..io.images import ImageError, read_rgb
from ..io.labels import IGNORE_INDEX, INSTANCE_OFFSET
from ..registry import TRANSFORMS
from .base import DenseTransform
from .loading import _add_field, _check_same_size


def rgb_to_id(rgb: np.ndarray) -> np.ndarray:
    """COCO panoptic PNG colours 'h w 3' (RGB) -> segment ids 'h w' int64: ``R + 256 G + 256^2 B``."""
    rgb = rgb.astype(np.int64)
    return rgb[..., 0] + 256 * rgb[..., 1] + 256 * 256 * rgb[..., 2]


def semantic_from_segments(segment_map: np.ndarray, segments: list[dict]) -> np.ndarray:
    """'h w' uint8: each pixel's segment label, 255 (ignore) on void (0) and on crowd segments."""
    lookup = np.array([IGNORE_INDEX] + [IGNORE_INDEX if s['iscrowd'] else s['label'] for s in segments], np.uint8)
    return lookup[segment_map]


def read_coco_panoptic(path, segments_info: list[dict]) -> tuple[np.ndarray, list[dict]]:
    """A COCO panoptic PNG and its segments (dicts with 'id', 'label', 'isthing', 'iscrowd') -> ('h w' int32
    segment map, segments in map order). Pixels of id 0 are void; an id of the PNG missing from ``segments_info``
    is an error naming the file."""
    ids = rgb_to_id(read_rgb(path))
    present, inverse = np.unique(ids, return_inverse=True)
    index = {int(s['id']): k for k, s in enumerate(segments_info, start=1)}
    unknown = [int(i) for i in present if i != 0 and int(i) not in index]
    if unknown:
        raise ImageError(f"panoptic PNG {path} has segment ids {unknown[:5]} (id = R + 256 G + 256^2 B) that its "
                         f"annotation's segments_info does not list (it lists {sorted(index)[:10]}); the PNG and "
                         f"the JSON must come from the same COCO panoptic export")
    lookup = np.array([index.get(int(i), 0) for i in present], np.int32)  # 0 stays 0 (void)
    segments = [dict(label=int(s['label']), isthing=bool(s['isthing']), iscrowd=bool(s['iscrowd']))
                for s in segments_info]
    return lookup[inverse].reshape(ids.shape), segments


@TRANSFORMS.register_module()
class LoadPanopticAnnotations(DenseTransform):
    """Load a panoptic annotation: 'gt_segment_map', 'segments' and 'gt_seg_map' (see the module docstring).

    From a COCO panoptic PNG ('pan_map_path' with 'segments_info' in the data info, as
    :class:`~heads.datasets.CocoPanopticDataset` gives), or kept as they are when the data info already holds
    'gt_segment_map' and 'segments' (datasets that derive them, e.g. :class:`~heads.datasets.CamVidPanopticDataset`).
    Maps of another size than the image as loaded are an error. Put it where LoadAnnotations would go.
    ``instances``: which segments become ``gt_instances`` when packed, 'all' (things and stuff: panoptic training)
    or 'things' (instance segmentation).
    """

    def __init__(self, instances: str = 'all'):
        if instances not in ('all', 'things'):
            raise ValueError(f"instances must be 'all' (things and stuff) or 'things', got {instances!r}")
        self.instances = instances

    def transform(self, results: dict) -> dict:
        results['stuff_instances'] = self.instances == 'all'
        if results.get('gt_segment_map') is None:
            if results.get('pan_map_path') is None or 'segments_info' not in results:
                raise KeyError("LoadPanopticAnnotations needs results['pan_map_path'] and results['segments_info'] "
                               "(a COCO panoptic PNG and its segments) or an in-memory 'gt_segment_map' with "
                               "'segments'; the dataset's data info has neither")
            results['gt_segment_map'], results['segments'] = read_coco_panoptic(results['pan_map_path'],
                                                                                results['segments_info'])
            _check_same_size(results['gt_segment_map'], results['pan_map_path'], results, 'panoptic map')
        else:
            _check_same_size(results['gt_segment_map'], None, results, 'panoptic map')
        if results.get('gt_seg_map') is None:
            results['gt_seg_map'] = semantic_from_segments(results['gt_segment_map'], results['segments'])
        for field in ('gt_seg_map', 'gt_segment_map'):
            _add_field(results, field)
        return results


def panoptic_targets(segment_map: np.ndarray, segments: list[dict], num_classes: int, with_stuff: bool = True
                     ) -> tuple[InstanceData, PixelData]:
    """A segment map ('h w', 0 = void) and its segments -> (``gt_instances``, ``gt_panoptic_seg``).

    ``gt_instances``: labels 'n' int64 and masks 'n h w' bool of the non-crowd segments still present in the map (a
    crop may have removed some), in segment order: things and, with ``with_stuff``, stuff too, the targets of a
    panoptic mask-classification model as detectron2 and transformers build them (``with_stuff=False``: instance
    segmentation). ``gt_panoptic_seg``: PixelData with 'data' '1 h w' int64, ``label + instance * INSTANCE_OFFSET``
    (thing instances numbered 0, 1, ... in segment order, stuff instance 0), ``num_classes`` on void and crowd
    pixels, and 'crowd' '1 h w' int64, the label of the crowd segment on its pixels and ``num_classes`` elsewhere
    (panoptic quality leaves predictions on crowd regions uncounted, :mod:`heads.evaluation.panoptic`).
    """
    if not 0 < num_classes < INSTANCE_OFFSET:
        raise ValueError(f"num_classes must be in 1..{INSTANCE_OFFSET - 1} to pack label + instance * "
                         f"{INSTANCE_OFFSET} (heads.io.labels.INSTANCE_OFFSET), got {num_classes}")
    panoptic = np.full(segment_map.shape, num_classes, np.int64)
    crowd = np.full(segment_map.shape, num_classes, np.int64)
    labels, masks, things = [], [], 0
    for k in np.unique(segment_map):
        if k == 0:
            continue
        segment, mask = segments[k - 1], segment_map == k
        if not 0 <= segment['label'] < num_classes:
            raise ValueError(f"segment {k} has label {segment['label']}, outside the {num_classes} classes")
        if segment['iscrowd']:
            crowd[mask] = segment['label']
            continue
        if segment['isthing']:
            panoptic[mask] = segment['label'] + things * INSTANCE_OFFSET
            things += 1
        else:
            panoptic[mask] = segment['label']
        if segment['isthing'] or with_stuff:
            labels.append(segment['label'])
            masks.append(mask)
    instances = InstanceData(labels=torch.tensor(labels, dtype=torch.int64),
                             masks=torch.from_numpy(np.stack(masks) if masks else
                                                    np.zeros((0, *segment_map.shape), bool)))
    return instances, PixelData(data=torch.from_numpy(panoptic)[None], crowd=torch.from_numpy(crowd)[None])
