"""COCO panoptic segmentation: images, PNG segment maps (id = R + 256 G + 256^2 B) and the JSON's segments_info.

The JSON (e.g. ``panoptic_val2017.json``) has 'images' (id, file_name, height, width), 'annotations' (one per image:
image_id, file_name of its PNG, segments_info = [{id, category_id, iscrowd, area, bbox}]) and 'categories'
(id, name, isthing). Classes are the categories in their listed order, numbered 0..K-1; 'thing_classes' and
'stuff_classes' enter the metainfo. :class:`~heads.transforms.LoadPanopticAnnotations` reads the PNG and
:class:`~heads.transforms.PackDenseInputs` gives ``gt_sem_seg``, ``gt_instances`` and ``gt_panoptic_seg``.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..io.palettes import default_palette
from ..registry import DATASETS
from .base import DenseDataset

LAYOUT = ("a COCO panoptic JSON with 'images', 'annotations' (image_id, file_name, segments_info) and "
          "'categories' (id, name, isthing), the PNGs it names in pan_dir and the images in img_dir")


def read_panoptic_json(path) -> dict:
    """The parsed JSON, checked for the three lists; errors name the file and the missing key."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"COCO panoptic annotation file {path} does not exist; expected {LAYOUT}")
    with open(path) as f:
        data = json.load(f)
    for key in ('images', 'annotations', 'categories'):
        if not isinstance(data.get(key), list):
            raise ValueError(f"COCO panoptic annotation file {path} has no list {key!r}; expected {LAYOUT}")
    return data


@DATASETS.register_module()
class CocoPanopticDataset(DenseDataset):
    """Images under ``img_dir`` and panoptic PNGs under ``pan_dir`` (both relative to ``data_root``) of the COCO
    panoptic JSON ``ann_file`` (module docstring). Images without a panoptic annotation are skipped."""

    METAINFO = dict(classes=None, palette=None, thing_classes=None, stuff_classes=None)

    def __init__(self, ann_file: str, img_dir: str = '', pan_dir: str = '', data_root: str = '', pipeline=(),
                 **kwargs):
        super().__init__(ann_file=str(ann_file), data_root=str(data_root),
                         data_prefix=dict(img_path=str(img_dir), pan_map_path=str(pan_dir)), pipeline=pipeline,
                         **kwargs)

    def load_data_list(self) -> list[dict]:
        data = read_panoptic_json(self.ann_file)
        categories = data['categories']
        if not categories or len(categories) > 255:
            raise ValueError(f"COCO panoptic annotation file {self.ann_file} lists {len(categories)} categories; "
                             f"between 1 and 255 fit a uint8 semantic map with 255 = ignore")
        label_of = {cat['id']: label for label, cat in enumerate(categories)}
        isthing = {cat['id']: bool(cat.get('isthing', 0)) for cat in categories}
        names = tuple(cat['name'] for cat in categories)
        self._metainfo.update(classes=names, palette=self._metainfo.get('palette') or default_palette(len(names)),
                              thing_classes=tuple(n for n, c in zip(names, categories) if isthing[c['id']]),
                              stuff_classes=tuple(n for n, c in zip(names, categories) if not isthing[c['id']]))
        images = {image['id']: image for image in data['images']}
        data_list = []
        for ann in data['annotations']:
            image = images.get(ann['image_id'])
            if image is None:
                raise ValueError(f"{self.ann_file}: annotation {ann['file_name']} names image_id {ann['image_id']}, "
                                 f"which 'images' does not list")
            segments = []
            for segment in ann['segments_info']:
                if segment['category_id'] not in label_of:
                    raise ValueError(f"{self.ann_file}: segment {segment['id']} of {ann['file_name']} has "
                                     f"category_id {segment['category_id']}, not one of 'categories'")
                segments.append(dict(id=segment['id'], label=label_of[segment['category_id']],
                                     isthing=isthing[segment['category_id']], iscrowd=bool(segment.get('iscrowd'))))
            data_list.append(dict(img_path=str(Path(self.data_prefix['img_path']) / image['file_name']),
                                  pan_map_path=str(Path(self.data_prefix['pan_map_path']) / ann['file_name']),
                                  segments_info=segments, height=image['height'], width=image['width'],
                                  image_id=image['id'], seg_fields=[]))
        if not data_list:
            raise ValueError(f"COCO panoptic annotation file {self.ann_file} has no annotations; expected {LAYOUT}")
        return data_list
