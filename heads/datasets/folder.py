"""Semantic segmentation from two folders: images and same-stem label maps."""
from __future__ import annotations

from ..io.palettes import default_palette
from ..registry import DATASETS
from .base import DenseDataset, check_paired, list_files


@DATASETS.register_module()
class FolderSegDataset(DenseDataset):
    """``{data_root}/{img_dir}/**/*{img_suffix}`` paired by stem with ``{data_root}/{ann_dir}/**/*{seg_suffix}``.

    Label maps are single-channel index PNGs. Each data info carries 'img_path', 'seg_map_path',
    'label_map', 'reduce_zero_label' and 'seg_fields' for :class:`~heads.transforms.LoadAnnotations`.
    ``classes``/``palette`` go into ``metainfo`` (a missing palette gets mmseg's seeded random colours).
    An image without a label map is an error; label maps without images are ignored.
    """

    METAINFO = dict(classes=None, palette=None)

    def __init__(self, data_root: str = '', img_dir: str = '', ann_dir: str = '', img_suffix: str = '.jpg',
                 seg_suffix: str = '.png', reduce_zero_label: bool = False, label_map: dict | None = None,
                 classes=None, palette=None, pipeline=(), metainfo: dict | None = None, **kwargs):
        self.img_suffix, self.seg_suffix = img_suffix, seg_suffix
        self.reduce_zero_label, self.label_map = reduce_zero_label, label_map
        metainfo = dict(metainfo or {})
        if classes is not None:
            metainfo['classes'] = tuple(classes)
            metainfo.setdefault('palette', default_palette(len(classes)) if palette is None else palette)
        elif palette is not None:
            metainfo['palette'] = palette
        prefix = dict(img_path=str(img_dir), seg_map_path=str(ann_dir))
        super().__init__(data_root=str(data_root), data_prefix=prefix, metainfo=metainfo, pipeline=pipeline,
                         **kwargs)

    def layout(self) -> str:
        """The expected folder layout, for error messages."""
        return (f"{self.data_prefix['img_path']}/*{self.img_suffix} (images) with label maps of the same stem "
                f"in {self.data_prefix['seg_map_path']}/*{self.seg_suffix}")

    def load_data_list(self) -> list[dict]:
        images = list_files(self.data_prefix['img_path'], self.img_suffix, 'image', self.layout())
        labels = list_files(self.data_prefix['seg_map_path'], self.seg_suffix, 'annotation', self.layout())
        check_paired(images, labels, 'label map', lambda stem: f"{self.data_prefix['seg_map_path']}/{stem}"
                     f"{self.seg_suffix}", self.layout())
        return [dict(img_path=str(path), seg_map_path=str(labels[stem]), label_map=self.label_map,
                     reduce_zero_label=self.reduce_zero_label, seg_fields=[])
                for stem, path in images.items()]
