"""Resumable export of a backbone's multi-scale maps into safetensors shards, described by ``index.json``.

Layout of the output folder:

- ``shard_00000.safetensors``, ``shard_00001.safetensors``, ...: shard k holds images
  ``k * images_per_shard ... (k + 1) * images_per_shard - 1`` of the image list, tensor ``"{image_id}/{level}"``
  ('c h w', level = position in ``index['levels']``) per image and level;
- ``index.json``: backbone name, ``weights_hash``, the export ``settings`` (model, size rule, mean/std, dtype,
  images per shard), ``levels`` [{name, stride, channels}], the finished ``shards`` [{file, bytes, images}] and
  the ``images`` of those shards [{id, file_name, height, width, input_height, input_width, shard}].

Both are written atomically (``*.partial``, then ``os.replace``); the index is rewritten after each shard, and
lists only finished shards. Resume: a rerun with the same settings and weights keeps every shard the index
lists with the same images and whose file has the recorded size, without running the model on its images, and
computes the others; ``*.partial`` files (an export killed while writing) are deleted. Different settings,
weights or images in an existing index raise :class:`ExportSettingsError` (use another folder or ``overwrite``).
"""
from __future__ import annotations

import json
import math
import os
import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn
from tqdm import tqdm

from zoo.weights.durable import replace_durably

from ..engine.config.diff import flatten
from ..io.images import read_rgb
from .hashing import weights_hash
from .preprocess import input_size, preprocess, size_multiple
from .sources import ImageEntry

INDEX = 'index.json'
FORMAT = 'vit-dense-zoo features'
VERSION = 1
SIZE_RULE = ('resize (bilinear) so that the short side is short_side, keeping the aspect ratio, then round each '
             'side to the nearest multiple of multiple (at least one)')
DTYPES = {'float32': torch.float32, 'float16': torch.float16, 'bfloat16': torch.bfloat16}


class ExportSettingsError(ValueError):
    """The output folder holds features made with other settings, weights or images."""


@dataclass
class ExportSummary:
    out: Path
    written: int  # images computed by this run
    skipped: int  # images of shards an earlier run finished
    shards_written: int
    shards: int  # finished shards listed in the index

    def __str__(self) -> str:
        return (f"{self.written} images written, {self.skipped} skipped as already done; {self.shards_written} "
                f"shards written now, {self.shards} in {self.out}")


def shard_name(k: int) -> str:
    return f'shard_{k:05d}.safetensors'


def level_names(strides: Sequence[int], pyramid: bool = False) -> list[str]:
    """``p{log2 stride}`` (p2..p6, FPN's names) for a pyramid's levels; ``out0``, ``out1``, ... otherwise
    (a backbone's levels may share a stride, e.g. ViT's)."""
    strides = [int(s) for s in strides]
    if pyramid and len(set(strides)) == len(strides) and all(s & (s - 1) == 0 for s in strides):
        return [f'p{int(math.log2(s))}' for s in strides]
    return [f'out{i}' for i in range(len(strides))]


def export_features(model: nn.Module, images: Sequence[ImageEntry], out, *, short_side: int | None = None,
                    model_settings: dict | None = None, names: Sequence[str] | None = None,
                    dtype: str = 'float32', images_per_shard: int = 64, overwrite: bool = False,
                    device='cpu', pretrained=None, progress: bool = True) -> ExportSummary:
    """Export ``model``'s maps of ``images`` into ``out`` (see the module doc), resuming an earlier export.

    ``model``: ``forward('1 3 h w') -> list of '1 c h/s w/s'`` with ``out_channels``, ``out_strides`` and
    ``pretrained_cfg`` (mean, std, input_size, name). ``short_side``: default ``min(pretrained_cfg['input_size'])``.
    ``model_settings``: what built the model (name, kwargs, ...), compared on resume with the weights hash.
    ``names``: level names (default :func:`level_names`). ``pretrained`` is only recorded.
    """
    header = _header(model, images, short_side, model_settings, names, dtype, images_per_shard)
    out = Path(out)
    old = _open_folder(out, header, overwrite)
    chunks = [images[i:i + images_per_shard] for i in range(0, len(images), images_per_shard)]
    plan = _plan(out, old, chunks)
    skipped = len(images) - sum(len(chunks[k]) for k in plan.todo)
    model = model.eval().to(device)
    warned = set()
    bar = tqdm(total=len(images), initial=skipped, desc='export', unit='image', disable=not progress)
    for k in plan.todo:
        name = shard_name(k)
        done = _export_shard(model, chunks[k], out / name, header, device, warned, bar)
        plan.shards[name] = dict(file=name, bytes=(out / name).stat().st_size, images=len(done))
        plan.records[name] = done
        _write_index(out, header, pretrained, plan.shards, plan.records)
    bar.close()
    if plan.lost and not plan.todo:  # nothing computed, but the index lists shards that went missing
        _write_index(out, header, pretrained, plan.shards, plan.records)
    return ExportSummary(out, written=len(images) - skipped, skipped=skipped, shards_written=len(plan.todo),
                         shards=len(plan.shards))


def _header(model: nn.Module, images: Sequence[ImageEntry], short_side: int | None, model_settings: dict | None,
            names: Sequence[str] | None, dtype: str, images_per_shard: int) -> dict:
    """The index's header (format, backbone, weights hash, settings, levels) of this export, its arguments checked:
    ValueError for a dtype, shard size, short side or level names that cannot be, or image ids that repeat."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if images_per_shard < 1:
        raise ValueError(f"images_per_shard must be at least 1, got {images_per_shard}")
    ids = [str(e.id) for e in images]
    repeated = [i for i, n in Counter(ids).items() if n > 1]
    if repeated:
        raise ValueError(f"image ids must be unique; repeated: {repeated[:10]}")
    cfg = model.pretrained_cfg
    short_side = int(short_side or min(cfg['input_size']))
    if short_side < 1:
        raise ValueError(f"short_side must be positive, got {short_side}")
    strides, channels = list(model.out_strides), list(model.out_channels)
    names = list(names or level_names(strides))
    if not len(names) == len(strides) == len(channels):
        raise ValueError(f"{len(names)} level names for {len(strides)} levels")
    settings = dict(
        model=dict(model_settings or {'backbone': cfg.get('name')}),
        resize=dict(rule=SIZE_RULE, short_side=short_side, multiple=size_multiple(model),
                    interpolation='bilinear (cv2.INTER_LINEAR)'),
        normalize=dict(rule='RGB / 255, then (x - mean) / std', mean=list(cfg['mean']), std=list(cfg['std'])),
        dtype=dtype, images_per_shard=int(images_per_shard))
    return _plain(dict(format=FORMAT, version=VERSION, backbone=settings['model'].get('backbone', cfg.get('name')),
                       weights_hash=weights_hash(model), settings=settings,
                       levels=[dict(name=n, stride=int(s), channels=int(c))
                               for n, s, c in zip(names, strides, channels)]))


def _open_folder(out: Path, header: dict, overwrite: bool) -> dict | None:
    """Make ``out``, delete what a killed export (and with ``overwrite``, any export) left there, and return the
    index of an earlier export, checked to have ``header``'s settings and weights (None when there is none)."""
    out.mkdir(parents=True, exist_ok=True)
    _clean(out, overwrite)
    old = None if overwrite else _read_index(out)
    if old is not None:
        _check_same(out, old, header)
    return old


@dataclass
class _Plan:
    """What an export does in a folder: the shards to compute (``todo``, by number), the finished ones it keeps
    (``shards``: file -> index entry, ``records``: file -> its images' records) and those it dropped as ``lost``."""
    todo: list[int]
    shards: dict[str, dict]
    records: dict[str, list[dict]]
    lost: list[str]


def _plan(out: Path, old: dict | None, chunks: list[Sequence[ImageEntry]]) -> _Plan:
    """Shards of an earlier run (``old``, its index) are kept if their images are the planned ones (``chunks``,
    shard k's images) and their file is intact; the others are computed. ExportSettingsError where the folder holds
    other images in a planned shard, or planned images in a shard beyond the plan."""
    shards = {s['file']: s for s in (old or {}).get('shards', [])}
    records = defaultdict(list)
    for record in (old or {}).get('images', []):
        records[record['shard']].append(record)
    todo = []
    for k, chunk in enumerate(chunks):
        name = shard_name(k)
        if name in shards:
            recorded = records[name]
            n = min(len(recorded), len(chunk))
            if [(str(r['id']), r['file_name']) for r in recorded[:n]] != [(str(e.id), e.file_name) for e in chunk[:n]]:
                raise ExportSettingsError(
                    f"{out} holds features of other images: {name} lists {_ids(recorded)}, this export puts "
                    f"{_ids(chunk, attr=True)} there; use another output folder, or --overwrite "
                    f"(overwrite=True) to delete the export there and start again")
            if len(recorded) >= len(chunk) and _intact(out, shards[name]):
                continue
            if len(recorded) >= len(chunk):
                warnings.warn(f"{out / name} is missing or not of its recorded size: computing it again")
            del shards[name], records[name]
        todo.append(k)
    lost = [n for n in shards if not _intact(out, shards[n])]  # finished shards beyond this image list
    for name in lost:
        warnings.warn(f"{out / name} is missing or not of its recorded size: dropped from the index")
        del shards[name], records[name]
    planned = {str(e.id) for chunk in chunks for e in chunk}
    plan_shards = {shard_name(k) for k in range(len(chunks))}
    strays = [r['id'] for name in shards if name not in plan_shards for r in records[name] if str(r['id']) in planned]
    if strays:
        raise ExportSettingsError(f"{out} holds features of images {strays[:10]} in other shards than this export "
                                  f"puts them; use another output folder, or --overwrite")
    return _Plan(todo, shards, records, lost)


def _export_shard(model: nn.Module, chunk: Sequence[ImageEntry], path: Path, header: dict, device, warned: set,
                  bar) -> list[dict]:
    """Shard ``path``: the maps of the images of ``chunk``, written atomically; returns their index records."""
    tensors, done = {}, []
    for entry in chunk:
        record, maps = _image_maps(model, entry, header, device, warned)
        tensors.update({f'{entry.id}/{i}': fmap for i, fmap in enumerate(maps)})
        done.append(dict(record, shard=path.name))
        bar.update()
    _atomic_save(tensors, path, dict(format=FORMAT, weights_hash=header['weights_hash'],
                                     image_ids=json.dumps([r['id'] for r in done])))
    return done


def _image_maps(model: nn.Module, entry: ImageEntry, header: dict, device, warned: set) -> tuple[dict, list]:
    """One image through ``model``: its index record (less the shard) and its maps ('c h w' on the CPU in the
    export's dtype), checked against the header's levels (``warned``: levels already warned about)."""
    cfg, settings = model.pretrained_cfg, header['settings']
    image = read_rgb(entry.path)
    height, width = image.shape[:2]
    if entry.height is not None and (entry.height, entry.width) != (height, width):
        warnings.warn(f"image {entry.path} is {height}x{width} (h x w) but its annotation says "
                      f"{entry.height}x{entry.width}; the index records the decoded size")
    size = input_size(height, width, settings['resize']['short_side'], settings['resize']['multiple'])
    with torch.inference_mode():
        maps = model(preprocess(image, size, cfg['mean'], cfg['std']).to(device))
    _check_maps(maps, header['levels'], size, entry.path, warned)
    stored = [fmap[0].detach().to('cpu', DTYPES[settings['dtype']]).clone().contiguous() for fmap in maps]
    record = dict(id=entry.id, file_name=entry.file_name, height=height, width=width, input_height=size[0],
                  input_width=size[1])
    return record, stored


def _plain(value):
    """``value`` as JSON gives it back (tuples as lists), so that it compares equal with a read index."""
    return json.loads(json.dumps(value))


def _ids(items, attr: bool = False, n: int = 3) -> str:
    ids = [item.id if attr else item['id'] for item in items]
    return f"{ids[:n]}{' ...' if len(ids) > n else ''}"


def _clean(out: Path, overwrite: bool) -> None:
    """Delete ``*.partial`` files (left by a killed export) and, with ``overwrite``, the export's files."""
    for path in out.glob('*.partial'):
        path.unlink()
    if overwrite:
        for path in [*out.glob('shard_*.safetensors'), out / INDEX]:
            path.unlink(missing_ok=True)


def _read_index(out: Path) -> dict | None:
    path = out / INDEX
    if not path.is_file():
        return None
    try:
        index = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ExportSettingsError(f"{path} is not valid JSON ({err}); use another output folder, or --overwrite "
                                  f"to start again") from err
    if not isinstance(index, dict) or index.get('format') != FORMAT:
        raise ExportSettingsError(f"{path} is not the index of a feature export; use another output folder, "
                                  f"or --overwrite to replace it")
    return index


def _check_same(out: Path, old: dict, new: dict) -> None:
    keys = ('version', 'backbone', 'weights_hash', 'settings', 'levels')
    before = flatten({k: old.get(k) for k in keys})
    after = flatten({k: new[k] for k in keys})
    changed = [f"{k}: {before.get(k)!r} there, {after.get(k)!r} now" for k in sorted(set(before) | set(after))
               if before.get(k) != after.get(k)]
    if changed:
        raise ExportSettingsError(
            f"{out} holds features exported with other settings or weights:\n  " + '\n  '.join(changed) +
            "\nuse another output folder, or --overwrite (overwrite=True) to delete the export there and start again")


def _intact(out: Path, shard: dict) -> bool:
    path = out / shard['file']
    return path.is_file() and path.stat().st_size == shard['bytes']


def _check_maps(maps, levels: list[dict], size, path, warned: set) -> None:
    """Count and channels must match the levels; a map not of input size / stride is warned about once per
    level (a backbone whose declared stride is approximate, e.g. CrossViT's resampled branch)."""
    if len(maps) != len(levels):
        raise RuntimeError(f"the model gave {len(maps)} maps for {len(levels)} levels (image {path})")
    for fmap, level in zip(maps, levels):
        if fmap.shape[:2] != (1, level['channels']):
            raise RuntimeError(f"level {level['name']} of image {path} is {tuple(fmap.shape)}: expected 1 image "
                               f"of {level['channels']} channels (the model's out_channels)")
        expected = (size[0] // level['stride'], size[1] // level['stride'])
        if tuple(fmap.shape[2:]) != expected and level['name'] not in warned:
            warned.add(level['name'])
            warnings.warn(f"level {level['name']} of image {path} ({size[0]}x{size[1]} input) is "
                          f"{tuple(fmap.shape[2:])}, not input size / stride {level['stride']} = {expected}: "
                          f"the backbone's stride is approximate; use the stored map sizes")


def _atomic_save(tensors: dict, path: Path, metadata: dict) -> None:
    partial = path.with_name(path.name + '.partial')
    save_file(tensors, str(partial), metadata=metadata)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(partial, 0o666 & ~umask)  # safetensors creates files readable by their owner only
    replace_durably(partial, path)


def _write_index(out: Path, header: dict, pretrained, shards: dict, records: dict) -> None:
    names = sorted(shards)
    index = dict(header, pretrained=None if pretrained is None else str(pretrained),
                 shards=[shards[n] for n in names], images=[r for n in names for r in records[n]])
    partial = out / (INDEX + '.partial')
    partial.write_text(json.dumps(index, indent=1))
    replace_durably(partial, out / INDEX)
