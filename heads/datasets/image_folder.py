"""Image classification from an ImageFolder tree: ``{data_root}/{split}/{class}/*.jpg`` (torchvision's layout)."""
from __future__ import annotations

import logging
from pathlib import Path

from mmengine.logging import print_log

from ..io.files import files_under
from ..io.images import IMAGE_SUFFIXES
from ..registry import DATASETS
from .base import DenseDataset


@DATASETS.register_module()
class ImageFolderDataset(DenseDataset):
    """One sub-folder per class under ``{data_root}/{split}`` (``split`` '' = data_root itself), classes in sorted
    folder order unless ``classes`` names them (then only those folders, in that order: label = position; a named
    class without a folder is warned about). Each data info: 'img_path' and 'gt_label' (int). A missing or empty
    tree is an error that names the folder and the expected layout."""

    METAINFO = dict(classes=None)

    def __init__(self, data_root: str, split: str = 'train', classes=None, pipeline=(), **kwargs):
        self.split, self.classes = split, None if classes is None else tuple(classes)
        super().__init__(data_root=str(data_root), pipeline=pipeline, **kwargs)

    def layout(self) -> str:
        return f"{self.folder}/<class name>/<image>{{{','.join(IMAGE_SUFFIXES)}}} (torchvision's ImageFolder)"

    @property
    def folder(self) -> Path:
        return Path(self.data_root) / self.split

    def load_data_list(self) -> list[dict]:
        if not self.folder.is_dir():
            raise FileNotFoundError(f"image folder {self.folder} does not exist; expected {self.layout()}")
        found = sorted(p.name for p in self.folder.iterdir() if p.is_dir())
        classes = self.classes or tuple(found)
        missing = [name for name in classes if name not in found]
        if missing:  # a split may lack rare classes; a misspelt name shows here
            print_log(f"classes {missing} have no folder in {self.folder} (found {found})", logger='current',
                      level=logging.WARNING)
        data = [dict(img_path=str(path), gt_label=label)
                for label, name in enumerate(classes)
                for path in files_under(self.folder / name) if path.suffix.lower() in IMAGE_SUFFIXES]
        if not data:
            raise ValueError(f"image folder {self.folder} holds no images; expected {self.layout()}")
        self._metainfo.update(classes=classes)
        return data
