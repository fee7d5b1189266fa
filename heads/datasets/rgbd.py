"""Monocular depth from RGB-D frames: an RGB folder, a depth folder, and a list of frame stems."""
from __future__ import annotations

from pathlib import Path

from ..registry import DATASETS
from .base import DenseDataset


@DATASETS.register_module()
class RGBDDepthDataset(DenseDataset):
    """Frames ``{data_root}/{rgb_dir}/{stem}{rgb_suffix}`` and ``{data_root}/{depth_dir}/{stem}{depth_suffix}``
    for each stem in ``{data_root}/{list_file}`` (one per line, blank lines ignored).

    Depth maps are raw integers: metres = raw / ``depth_scale``; raw values in ``depth_invalid`` mean "no
    measurement" and become 0. Both go into each data info for
    :class:`~heads.transforms.LoadAnnotations` ``(seg=False, depth=True)``. Defaults fit Kinect-style uint16
    millimetres (Microsoft 7-Scenes: 0 and 65535 invalid).
    """

    METAINFO = dict(classes=(), palette=())

    def __init__(self, data_root: str, list_file: str, rgb_dir: str = 'rgb', depth_dir: str = 'depth',
                 rgb_suffix: str = '.jpg', depth_suffix: str = '.png', depth_scale: float = 1000.0,
                 depth_invalid=(0, 65535), pipeline=(), **kwargs):
        self.rgb_suffix, self.depth_suffix = rgb_suffix, depth_suffix
        self.depth_scale, self.depth_invalid = float(depth_scale), list(depth_invalid)
        super().__init__(ann_file=list_file, data_root=str(data_root),
                         data_prefix=dict(img_path=rgb_dir, depth_path=depth_dir), pipeline=pipeline, **kwargs)

    def layout(self) -> str:
        return (f"a list file of frame stems, {self.data_prefix['img_path']}/<stem>{self.rgb_suffix} and "
                f"{self.data_prefix['depth_path']}/<stem>{self.depth_suffix}")

    def load_data_list(self) -> list[dict]:
        list_file = Path(self.ann_file)
        if not list_file.is_file():
            raise FileNotFoundError(f"frame list {list_file} does not exist; expected {self.layout()}")
        stems = [line.strip() for line in list_file.read_text().splitlines() if line.strip()]
        if not stems:
            raise ValueError(f"frame list {list_file} names no frames; expected one stem per line")
        data_list = []
        for stem in stems:
            rgb = Path(self.data_prefix['img_path']) / f'{stem}{self.rgb_suffix}'
            depth = Path(self.data_prefix['depth_path']) / f'{stem}{self.depth_suffix}'
            for path in (rgb, depth):
                if not path.is_file():
                    raise FileNotFoundError(f"frame '{stem}' listed in {list_file} has no file {path}; "
                                            f"expected {self.layout()}")
            data_list.append(dict(img_path=str(rgb), depth_path=str(depth), depth_scale=self.depth_scale,
                                  depth_invalid=self.depth_invalid, seg_fields=[]))
        return data_list
