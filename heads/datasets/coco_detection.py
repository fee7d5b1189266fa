"""Object detection samples from a COCO JSON, in torchvision's target format."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from mmengine.dataset import BaseDataset
from mmengine.structures import BaseDataElement

from ..io.images import read_rgb
from ..registry import DATASETS
from .coco import ann_to_mask, load_coco


@DATASETS.register_module()
class CocoDetectionDataset(BaseDataset):
    """Images of a COCO instances JSON (``ann_file``) under ``img_dir`` (both relative to ``data_root``); each sample is
    ``dict(inputs='3 h w' uint8, data_samples=BaseDataElement)``, the element's fields torchvision's target
    (boxes 'n 4' xyxy float, labels 'n' = category ids with 0 the background as torchvision counts, masks
    'n h w' uint8 when ``with_masks``), its metainfo ``image_id`` and ``img_path``.

    Crowd annotations are left out; images without instances are dropped when ``skip_empty`` (training).
    ``flip_prob``: chance of a horizontal flip of image, boxes and masks (training augmentation).
    """

    def __init__(self, ann_file: str, img_dir: str = '', data_root: str = '', with_masks: bool = False,
                 skip_empty: bool = False, flip_prob: float = 0.0, **kwargs):
        self.with_masks, self.skip_empty, self.flip_prob = with_masks, skip_empty, flip_prob
        super().__init__(ann_file=str(ann_file), data_root=str(data_root), data_prefix=dict(img_path=str(img_dir)),
                         serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        coco = load_coco(self.ann_file, "a COCO instances JSON (tools/make_camvid_detection.py writes one from CamVid)")
        categories = sorted(coco.dataset['categories'], key=lambda c: c['id'])
        self._metainfo.update(classes=tuple(c['name'] for c in categories),
                              ann_file=self.ann_file)  # CocoDetectionMetric's ground truth
        data_list = []
        for image in coco.dataset['images']:
            anns = [a for a in coco.imgToAnns.get(image['id'], []) if not a.get('iscrowd', 0)]
            if anns or not self.skip_empty:
                data_list.append(dict(img_path=str(Path(self.data_prefix['img_path']) / image['file_name']),
                                      image_id=image['id'],
                                      height=image['height'], width=image['width'], anns=anns))
        return data_list

    def prepare_data(self, idx: int) -> dict:
        info = self.get_data_info(idx)
        image = read_rgb(info['img_path'])
        if image.shape[:2] != (info['height'], info['width']):
            raise ValueError(f"image {info['img_path']} is {image.shape[1]}x{image.shape[0]} but {self.ann_file} "
                             f"says {info['width']}x{info['height']}")
        anns = info['anns']
        boxes = torch.tensor([[x, y, x + w, y + h] for x, y, w, h in (a['bbox'] for a in anns)],
                             dtype=torch.float32).reshape(-1, 4)
        target = dict(boxes=boxes, labels=torch.tensor([a['category_id'] for a in anns], dtype=torch.int64))
        if self.with_masks:
            masks = [ann_to_mask(a['segmentation'], info['height'], info['width']) for a in anns]
            target['masks'] = torch.from_numpy(np.stack(masks) if masks else
                                               np.zeros((0, info['height'], info['width']), np.uint8))
        inputs = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)  # h w c -> c h w
        if self.flip_prob and np.random.rand() < self.flip_prob:
            inputs, target = flip(inputs, target)
        meta = dict(image_id=info['image_id'], img_path=info['img_path'])
        return dict(inputs=inputs, data_samples=BaseDataElement(metainfo=meta, **target))


def flip(image: torch.Tensor, target: dict) -> tuple[torch.Tensor, dict]:
    """Mirror a 'c h w' image and its xyxy boxes and 'n h w' masks left-right."""
    width = image.shape[-1]
    flipped = dict(target, boxes=torch.stack([width - target['boxes'][:, 2], target['boxes'][:, 1],
                                              width - target['boxes'][:, 0], target['boxes'][:, 3]], dim=1))
    if 'masks' in target:
        flipped['masks'] = target['masks'].flip(-1)
    return image.flip(-1), flipped
