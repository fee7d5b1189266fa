"""Reading a feature export (``tools/export_features.py``): ``store[image_id] -> {level name: 'c h w' tensor}``.

The index is checked when the store opens (:func:`read_index`): valid JSON of the export's layout, and every
shard a plain file name in the store's own folder, so an index cannot make the reader open files elsewhere.
Problems are errors naming the file and the entry (:class:`FeatureStoreError`).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

INDEX = 'index.json'


class FeatureStoreError(ValueError):
    """A feature export whose index or shard cannot be used; the message names the file and the entry."""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_shard_name(name, where: str) -> None:
    """A shard is a ``.safetensors`` file directly in the store's folder: no directories, no '..', no drive."""
    if not isinstance(name, str) or not name.endswith('.safetensors') or '/' in name or '\\' in name \
            or ':' in name or name.startswith('.'):
        raise FeatureStoreError(f"{where}: shard {name!r} is not a .safetensors file name in the store's folder; "
                                f"an index may only name shards beside it (this one may have been edited or "
                                f"crafted: re-run the export)")


def read_index(path: Path) -> dict:
    """The index at ``path`` after checking its layout: ``levels`` [{name, stride, channels}] and ``images``
    [{id, shard, ...}] with unique ids and names; raises :class:`FeatureStoreError` naming the file and entry."""
    try:
        index = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise FeatureStoreError(f"{path} is not valid JSON ({err}); re-run the export") from err

    def bad(where: str, wanted: str):
        raise FeatureStoreError(f"{path}: {where} must be {wanted}; the index is damaged or not a feature export's "
                                f"(tools/export_features.py writes one)")

    if not isinstance(index, dict):
        bad('the top level', 'an object')
    levels, images = index.get('levels'), index.get('images')
    if not isinstance(levels, list) or not levels:
        bad("'levels'", 'a non-empty list')
    for i, level in enumerate(levels):
        if not (isinstance(level, dict) and isinstance(level.get('name'), str) and _is_int(level.get('stride'))
                and level['stride'] > 0 and _is_int(level.get('channels')) and level['channels'] > 0):
            bad(f"levels[{i}]", "an object with a string 'name' and positive integer 'stride' and 'channels'")
    if len({level['name'] for level in levels}) != len(levels):
        bad("the level names", 'unique')
    if not isinstance(images, list):
        bad("'images'", 'a list')
    seen = set()
    for i, record in enumerate(images):
        if not isinstance(record, dict) or not (_is_int(record.get('id')) or isinstance(record.get('id'), str)):
            bad(f"images[{i}]", "an object with an integer or string 'id'")
        if str(record['id']) in seen:
            bad(f"images[{i}].id {record['id']!r}", 'unique')
        seen.add(str(record['id']))
        _check_shard_name(record.get('shard'), f"{path}: images[{i}]")
    return index


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
        path = self.folder / INDEX
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: {self.folder} is not a feature export "
                                    f"(tools/export_features.py writes one)")
        index = read_index(path)
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
        try:
            with safe_open(str(path), framework='pt') as f:
                return {name: f.get_tensor(f"{record['id']}/{names.index(name)}") for name in wanted}
        except Exception as err:  # safetensors' own error types: a damaged header, a missing tensor
            raise FeatureStoreError(f"cannot read the maps of image {image_id!r} from shard {path}: {err}; run the "
                                    f"export again to recompute it") from err

    def __getitem__(self, image_id) -> dict[str, torch.Tensor]:
        return self.get(image_id)
