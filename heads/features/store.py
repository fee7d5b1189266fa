"""Reading a feature export (``tools/export_features.py``): ``store[image_id] -> {level name: 'c h w' tensor}``."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open


class FeatureStore:
    """A folder written by :func:`heads.features.export_features`.

    ``image_ids`` (export order), ``levels`` ([{name, stride, channels}]), ``meta`` (backbone, weights_hash,
    settings, ...: the index without its image and shard lists), ``info(image_id)`` (file_name, height, width,
    input_height, input_width, shard). ``store[image_id]`` / ``store.get(image_id, levels=None)`` read that
    image's maps from its shard, and only those tensors (safetensors ``safe_open``); an id may be given as its
    int or its string. Unknown ids raise KeyError (``get`` too: it takes no default).
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        path = self.folder / 'index.json'
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: {self.folder} is not a feature export "
                                    f"(tools/export_features.py writes one)")
        index = json.loads(path.read_text())
        self._images = {str(r['id']): r for r in index['images']}
        self.image_ids = [r['id'] for r in index['images']]
        self.levels = index['levels']
        self.meta = {k: v for k, v in index.items() if k not in ('images', 'shards')}

    def __len__(self) -> int:
        return len(self.image_ids)

    def __iter__(self):
        return iter(self.image_ids)

    def __contains__(self, image_id) -> bool:
        return str(image_id) in self._images

    def __repr__(self) -> str:
        return (f"FeatureStore({str(self.folder)!r}: {len(self)} images, {self.meta.get('backbone')}, levels "
                f"{[(lv['name'], lv['stride'], lv['channels']) for lv in self.levels]})")

    def info(self, image_id) -> dict:
        """The index record of ``image_id``: id, file_name, height, width, input_height, input_width, shard."""
        record = self._images.get(str(image_id))
        if record is None:
            shown = ', '.join(map(repr, self.image_ids[:3])) + (', ...' if len(self) > 3 else '')
            raise KeyError(f"image id {image_id!r} is not in the feature store {self.folder} "
                           f"({len(self)} image ids: {shown})")
        return record

    def get(self, image_id, levels=None) -> dict[str, torch.Tensor]:
        """``{level name: 'c h w' tensor}`` of ``image_id``; ``levels``: the names to read (default all)."""
        record = self.info(image_id)
        names = [lv['name'] for lv in self.levels]
        wanted = names if levels is None else list(levels)
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise KeyError(f"levels {unknown} are not in the feature store {self.folder} (levels: {names})")
        path = self.folder / record['shard']
        if not path.is_file():
            raise FileNotFoundError(f"shard {path} of image {image_id!r} is missing; run the export again to "
                                    f"recompute it")
        with safe_open(str(path), framework='pt') as f:
            return {name: f.get_tensor(f"{record['id']}/{names.index(name)}") for name in wanted}

    def __getitem__(self, image_id) -> dict[str, torch.Tensor]:
        return self.get(image_id)
