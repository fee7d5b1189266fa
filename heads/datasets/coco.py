"""Semantic segmentation rendered from COCO-format instance or stuff annotations (polygons or RLE)."""
from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from ..io.labels import IGNORE_INDEX
from ..io.palettes import default_palette
from ..registry import DATASETS
from .base import DenseDataset


def load_coco(ann_file, what: str = "a COCO JSON with 'images', 'annotations' and 'categories'") -> COCO:
    """pycocotools' index of ``ann_file`` (its progress prints silenced); a missing file is named with ``what``
    was expected there."""
    if not Path(ann_file).is_file():
        raise FileNotFoundError(f"COCO annotation file {ann_file} does not exist; expected {what}")
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(ann_file))


def ann_to_mask(segmentation, height: int, width: int) -> np.ndarray:
    """A COCO ``segmentation`` (polygons, uncompressed or compressed RLE) -> 'h w' uint8 0/1 mask.

    The same decoding as ``COCO.annToMask``, without needing the COCO index at hand.
    """
    if isinstance(segmentation, list):  # polygons: one object may have several parts
        rle = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation.get('counts'), list):  # uncompressed RLE
        rle = mask_utils.frPyObjects(segmentation, height, width)
    else:  # compressed RLE
        rle = segmentation
    with quiet_numpy2():
        return mask_utils.decode(rle)


def encode_mask(mask: np.ndarray) -> dict:
    """Compressed RLE (counts as str, JSON-ready) of an 'h w' bool mask."""
    with quiet_numpy2():
        rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {'size': list(rle['size']), 'counts': rle['counts'].decode('ascii')}


@contextlib.contextmanager
def quiet_numpy2():
    """pycocotools' Cython mask code warns under numpy 2 (no ``copy`` keyword in ``__array__``); harmless."""
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message=r".*__array__ implementation doesn't accept a copy keyword",
                                category=DeprecationWarning)
        yield


def render_semantic_map(anns: list[dict], height: int, width: int, ignore_index: int = IGNORE_INDEX) -> np.ndarray:
    """Paint ``anns`` (dicts with 'segmentation' and 'label') into an 'h w' uint8 map, ``ignore_index``
    where nothing is annotated. Larger masks are painted first, so smaller objects on top stay visible."""
    masks = [(ann_to_mask(ann['segmentation'], height, width).astype(bool), ann['label']) for ann in anns]
    labels = np.full((height, width), ignore_index, dtype=np.uint8)
    for mask, label in sorted(masks, key=lambda m: -int(m[0].sum())):  # stable: ties keep file order
        labels[mask] = label
    return labels


@DATASETS.register_module()
class CocoSegDataset(DenseDataset):
    """Images of a COCO JSON (``ann_file``) under ``img_dir`` with semantic maps rendered from its annotations.

    Classes are the JSON's categories in their listed order (or those named in ``classes``, in that order),
    numbered 0..K-1; annotations of other categories are dropped and unannotated pixels are 255. They enter
    ``metainfo`` when the JSON is read (with ``lazy_init=True``: at ``full_init()``). The map is
    rendered when a sample is fetched and put in the data info as 'gt_seg_map' (uint8 'h w'), which
    :class:`~heads.transforms.LoadAnnotations` keeps. Images without any kept annotation are skipped unless
    ``skip_empty=False``.
    """

    METAINFO = dict(classes=None, palette=None)

    def __init__(self, ann_file: str, img_dir: str = '', classes=None, palette=None, data_root: str = '',
                 skip_empty: bool = True, pipeline=(), metainfo: dict | None = None, **kwargs):
        self.classes, self.palette, self.skip_empty = classes, palette, skip_empty
        super().__init__(ann_file=str(ann_file), data_root=str(data_root),
                         data_prefix=dict(img_path=str(img_dir)), metainfo=metainfo, pipeline=pipeline, **kwargs)

    def load_data_list(self) -> list[dict]:
        coco = load_coco(self.ann_file, "a COCO instances/stuff JSON with 'images', 'annotations' and 'categories'")
        categories = self._select_categories(coco.dataset.get('categories', []))
        label_of = {cat['id']: label for label, cat in enumerate(categories)}
        palette = self.palette or self._metainfo.get('palette') or default_palette(len(categories))
        self._metainfo.update(classes=tuple(cat['name'] for cat in categories), palette=palette)
        data_list = []
        for image in coco.dataset.get('images', []):
            anns = [dict(segmentation=ann['segmentation'], label=label_of[ann['category_id']])
                    for ann in coco.imgToAnns.get(image['id'], []) if ann['category_id'] in label_of]
            if anns or not self.skip_empty:
                data_list.append(dict(img_path=str(Path(self.data_prefix['img_path']) / image['file_name']),
                                      height=image['height'], width=image['width'], coco_id=image['id'],
                                      coco_anns=anns, reduce_zero_label=False, label_map=None, seg_fields=[]))
        if not data_list:
            raise ValueError(f"COCO annotation file {self.ann_file} has no image with annotations of the "
                             f"selected categories {self._metainfo['classes']}")
        return data_list

    def _select_categories(self, categories: list[dict]) -> list[dict]:
        if not categories:
            raise ValueError(f"COCO annotation file {self.ann_file} lists no 'categories'")
        if self.classes is None:
            selected = categories
        else:
            by_name = {cat['name']: cat for cat in categories}
            unknown = [name for name in self.classes if name not in by_name]
            if unknown:
                raise ValueError(f"classes {unknown} are not categories of {self.ann_file}; "
                                 f"it has {sorted(by_name)}")
            selected = [by_name[name] for name in self.classes]
        if len(selected) > 255:
            raise ValueError(f"{len(selected)} categories do not fit a uint8 label map with 255 = ignore; "
                             f"select at most 255 with classes=[...]")
        return selected

    def get_data_info(self, idx: int) -> dict:
        info = super().get_data_info(idx)
        info['gt_seg_map'] = render_semantic_map(info.pop('coco_anns'), info['height'], info['width'])
        return info
