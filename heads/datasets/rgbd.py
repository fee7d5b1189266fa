"""Monocular depth from RGB-D frames: a folder of one's own RGB-D data (:class:`RGBDFolderDataset`) and its case
with a list of frame stems (:class:`RGBDDepthDataset`, Microsoft 7-Scenes). Files are read by
:mod:`heads.io.depth` through :class:`~heads.transforms.LoadAnnotations`; the folder is listed by
:mod:`heads.io.rgbd_folder`, which ``tools/check_dataset.py`` calls too."""
from __future__ import annotations

from ..io.depth import check_depth_suffix, checked_depth_scale
from ..io.rgbd_folder import Listing, list_rgbd_folder
from ..registry import DATASETS
from .base import DenseDataset


@DATASETS.register_module()
class RGBDFolderDataset(DenseDataset):
    """One's own RGB-D data: ``{data_root}/{rgb_dir}/<stem>.jpg|png`` with ``{data_root}/{depth_dir}/<stem>.png|npy``
    (same stem, subfolders allowed), an optional ``{data_root}/{mask_dir}/<stem>.png`` validity mask per frame
    (non-zero = valid) and optional intrinsics.

    Depth maps are raw values: metres = raw / ``depth_scale`` (1000 for millimetres, 1 for float metres in .npy);
    raw values in ``depth_invalid`` (and non-finite ones) mean "no measurement" and become 0. 16-bit PNGs and .npy
    arrays are read; OpenEXR is refused with how to convert it. ``list_file`` (one stem per line, blank lines
    ignored) picks and orders the frames; without it every image of ``rgb_dir`` is a frame, and an image without
    a depth map is an error (depth maps without an image are left out: ``tools/check_dataset.py`` names both).
    ``rgb_suffix``/``depth_suffix`` None accept any of :data:`~heads.io.depth.RGB_SUFFIXES` / ``.png``, ``.npy``;
    suffixes match in any case, subfolders and symbolic links to folders are followed, and a frame stored in two
    files (``a.png`` beside ``a.npy``) is an error naming both (:func:`~heads.io.rgbd_folder.list_rgbd_folder`).

    ``intrinsics``: 'auto' reads ``{data_root}/camera-intrinsics.txt`` (one for all frames, 7-Scenes' file) if it
    exists, else ``{data_root}/intrinsics/<stem>.txt`` per frame if that folder exists; a path names one shared
    file; None reads none. Each file is a 3x3 matrix or ``fx fy cx cy``; the data info's 'intrinsics' is the 3x3
    matrix as a list of rows, at the stored resolution (transforms do not update it).

    Each data info carries 'img_path', 'depth_path', 'depth_scale', 'depth_invalid' (and 'depth_mask_path',
    'intrinsics' when present) for :class:`~heads.transforms.LoadAnnotations` ``(seg=False, depth=True)``.
    """

    METAINFO = dict(classes=(), palette=())

    def __init__(self, data_root: str = '', list_file: str | None = None, rgb_dir: str = 'rgb',
                 depth_dir: str = 'depth', mask_dir: str | None = 'mask', rgb_suffix: str | None = None,
                 depth_suffix: str | None = None, depth_scale: float = 1000.0, depth_invalid=(0,),
                 intrinsics: str | None = 'auto', pipeline=(), **kwargs):
        if depth_suffix is not None:
            check_depth_suffix(f'{depth_dir}/*{depth_suffix}')
        self.rgb_suffix, self.depth_suffix = rgb_suffix, depth_suffix
        self.depth_scale, self.depth_invalid = checked_depth_scale(depth_scale), list(depth_invalid)
        self.intrinsics = intrinsics
        prefix = dict(img_path=rgb_dir, depth_path=depth_dir)
        if mask_dir is not None:
            prefix['depth_mask_path'] = mask_dir
        super().__init__(ann_file=list_file or '', data_root=str(data_root), data_prefix=prefix, pipeline=pipeline,
                         **kwargs)

    def layout(self) -> str:
        """The expected folder layout, for error messages."""
        rgb = self.rgb_suffix or '.jpg|.png'
        depth = self.depth_suffix or '.png|.npy'
        listed = 'a list file of frame stems, ' if self.ann_file else ''
        where = ('' if self.data_root else
                 ' (data_root is empty: give the dataset folder, e.g. tools/train.py CONFIG --data-root DIR)')
        return (f"{listed}{self.data_prefix['img_path']}/<stem>{rgb} and "
                f"{self.data_prefix['depth_path']}/<stem>{depth}{where}")

    def listing(self) -> Listing:
        """The folder's :class:`~heads.io.rgbd_folder.Listing` (frames, errors, notes): what
        ``tools/check_dataset.py`` reports, read by the same code."""
        return list_rgbd_folder(self.data_prefix['img_path'], self.data_prefix['depth_path'],
                                self.data_prefix.get('depth_mask_path'), self.rgb_suffix, self.depth_suffix,
                                list_file=self.ann_file or None, root=self.data_root or '.',
                                intrinsics=self.intrinsics)

    def load_data_list(self) -> list[dict]:
        listing = self.listing()
        listing.raise_first(self.layout())
        data_list = []
        for frame in listing.frames:
            info = dict(img_path=str(frame.rgb), depth_path=str(frame.depth), depth_scale=self.depth_scale,
                        depth_invalid=self.depth_invalid, seg_fields=[])
            if frame.mask is not None:
                info['depth_mask_path'] = str(frame.mask)
            if frame.intrinsics is not None:
                info['intrinsics'] = frame.intrinsics
            data_list.append(info)
        return data_list


@DATASETS.register_module()
class RGBDDepthDataset(RGBDFolderDataset):
    """:class:`RGBDFolderDataset` with a list file of frame stems (``{data_root}/{list_file}``, required) and
    Microsoft 7-Scenes' encoding by default: ``rgb/<stem>.jpg``, ``depth/<stem>.png`` uint16 millimetres (metres
    = raw / 1000), 0 and 65535 invalid, ``camera-intrinsics.txt`` shared."""

    def __init__(self, data_root: str, list_file: str, rgb_dir: str = 'rgb', depth_dir: str = 'depth',
                 rgb_suffix: str = '.jpg', depth_suffix: str = '.png', depth_scale: float = 1000.0,
                 depth_invalid=(0, 65535), pipeline=(), **kwargs):
        super().__init__(data_root=data_root, list_file=list_file, rgb_dir=rgb_dir, depth_dir=depth_dir,
                         rgb_suffix=rgb_suffix, depth_suffix=depth_suffix, depth_scale=depth_scale,
                         depth_invalid=depth_invalid, pipeline=pipeline, **kwargs)
