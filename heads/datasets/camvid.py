"""CamVid (SegNet version): 11 street-scene classes at 480x360, label 11 = void (ignored)."""
from __future__ import annotations

from ..io.labels import IGNORE_INDEX
from ..registry import DATASETS
from .folder import FolderSegDataset

CAMVID_CLASSES = ('Sky', 'Building', 'Pole', 'Road', 'Pavement', 'Tree', 'SignSymbol', 'Fence', 'Car',
                  'Pedestrian', 'Bicyclist')
CAMVID_PALETTE = ((128, 128, 128), (128, 0, 0), (192, 192, 128), (128, 64, 128), (60, 40, 222), (128, 128, 0),
                  (192, 128, 128), (64, 64, 128), (64, 0, 128), (64, 64, 0), (0, 128, 192))
VOID = 11
SPLITS = ('train', 'val', 'test')


@DATASETS.register_module()
class CamVidDataset(FolderSegDataset):
    """``{data_root}/images/{split}/*.jpg`` with ``annotations/{split}/*.png``; void (11) -> 255 by label_map."""

    METAINFO = dict(classes=CAMVID_CLASSES, palette=[list(c) for c in CAMVID_PALETTE])

    def __init__(self, data_root: str, split: str = 'train', **kwargs):
        if split not in SPLITS:
            raise ValueError(f"CamVid split must be one of {SPLITS}, got {split!r}")
        super().__init__(data_root=data_root, img_dir=f'images/{split}', ann_dir=f'annotations/{split}',
                         img_suffix='.jpg', seg_suffix='.png', label_map={VOID: IGNORE_INDEX}, **kwargs)

    def layout(self) -> str:
        return (f"{self.data_root}/images/{{train,val}}/*.jpg with same-stem label maps (8-bit, 0..10 classes, "
                f"11 void) in {self.data_root}/annotations/{{train,val}}/*.png")
