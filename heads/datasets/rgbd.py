"""Monocular depth from RGB-D frames: a folder of one's own RGB-D data (:class:`RGBDFolderDataset`) and its case
with a list of frame stems (:class:`RGBDDepthDataset`, Microsoft 7-Scenes). Files are read by
:mod:`heads.io.depth` (also used by ``tools/check_dataset.py``) through :class:`~heads.transforms.LoadAnnotations`."""
from __future__ import annotations

from pathlib import Path

from ..io.depth import (
    DEPTH_SUFFIXES,
    INTRINSICS_DIR,
    RGB_SUFFIXES,
    SHARED_INTRINSICS,
    check_depth_suffix,
    read_intrinsics,
    stems,
)
from ..registry import DATASETS
from .base import DenseDataset, check_paired


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
    ``rgb_suffix``/``depth_suffix`` None accept any of :data:`~heads.io.depth.RGB_SUFFIXES` / ``.png``, ``.npy``.

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
        if not float(depth_scale) > 0:
            raise ValueError(f"depth_scale must be positive (raw / depth_scale = metres), got {depth_scale}")
        self.rgb_suffix, self.depth_suffix = rgb_suffix, depth_suffix
        self.depth_scale, self.depth_invalid = float(depth_scale), list(depth_invalid)
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

    @staticmethod
    def _find(folder: str, stem: str, suffix: str | None, choices) -> Path | None:
        """The file ``folder/stem+suffix`` (any of ``choices`` for ``suffix`` None), or None."""
        for candidate in (suffix,) if suffix else choices:
            path = Path(folder) / f'{stem}{candidate}'
            if path.is_file():
                return path
        return None

    def _frames(self) -> list[tuple[str, Path, Path]]:
        """(stem, image, depth map) of every frame; a missing file is an error naming it."""
        rgb_dir, depth_dir = self.data_prefix['img_path'], self.data_prefix['depth_path']
        if self.ann_file:
            list_file = Path(self.ann_file)
            if not list_file.is_file():
                raise FileNotFoundError(f"frame list {list_file} does not exist; expected {self.layout()}")
            names = [line.strip() for line in list_file.read_text().splitlines() if line.strip()]
            if not names:
                raise ValueError(f"frame list {list_file} names no frames; expected one stem per line")
            frames = []
            for stem in names:
                rgb = self._find(rgb_dir, stem, self.rgb_suffix, RGB_SUFFIXES)
                depth = self._find(depth_dir, stem, self.depth_suffix, (*DEPTH_SUFFIXES, '.exr'))
                for path, folder, suffix in ((rgb, rgb_dir, self.rgb_suffix), (depth, depth_dir, self.depth_suffix)):
                    if path is None:
                        expected = Path(folder) / f'{stem}{suffix or ".*"}'
                        raise FileNotFoundError(f"frame '{stem}' listed in {list_file} has no file {expected}; "
                                                f"expected {self.layout()}")
                frames.append((stem, rgb, depth))
            return frames
        if not Path(rgb_dir).is_dir():
            raise FileNotFoundError(f"image folder {rgb_dir} does not exist; expected the layout {self.layout()}")
        images = stems(rgb_dir, (self.rgb_suffix,) if self.rgb_suffix else RGB_SUFFIXES)
        depths = stems(depth_dir, (self.depth_suffix,) if self.depth_suffix else (*DEPTH_SUFFIXES, '.exr'))
        if not images:
            raise ValueError(f"image folder {rgb_dir} holds no images; expected the layout {self.layout()}")
        check_paired(images, depths, 'depth map', lambda stem: f"{depth_dir}/{stem}{self.depth_suffix or '.png'}",
                     self.layout(), ' (tools/check_dataset.py lists them all)')
        return [(stem, path, depths[stem]) for stem, path in images.items()]

    def _intrinsics(self):
        """(shared 3x3 matrix or None, folder of per-frame files or None)."""
        if self.intrinsics is None:
            return None, None
        root = Path(self.data_root or '.')
        if self.intrinsics != 'auto':
            path = Path(self.intrinsics)
            return read_intrinsics(path if path.is_absolute() or path.is_file() else root / path), None
        if (root / SHARED_INTRINSICS).is_file():
            return read_intrinsics(root / SHARED_INTRINSICS), None
        return None, (root / INTRINSICS_DIR if (root / INTRINSICS_DIR).is_dir() else None)

    def load_data_list(self) -> list[dict]:
        shared, per_frame = self._intrinsics()
        mask_dir = self.data_prefix.get('depth_mask_path')
        data_list = []
        for stem, rgb, depth in self._frames():
            check_depth_suffix(depth)  # .exr: refused, saying how to convert
            info = dict(img_path=str(rgb), depth_path=str(depth), depth_scale=self.depth_scale,
                        depth_invalid=self.depth_invalid, seg_fields=[])
            mask = Path(mask_dir) / f'{stem}.png' if mask_dir else None
            if mask is not None and mask.is_file():
                info['depth_mask_path'] = str(mask)
            if shared is not None:
                info['intrinsics'] = shared
            elif per_frame is not None and (per_frame / f'{stem}.txt').is_file():
                info['intrinsics'] = read_intrinsics(per_frame / f'{stem}.txt')
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
