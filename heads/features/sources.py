"""The images of an export: a COCO annotation file's images, or the images in a folder."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..datasets.coco import load_coco
from ..io.images import images_in


@dataclass(frozen=True)
class ImageEntry:
    """One image: ``id`` (COCO's int id, or the folder-relative path), ``file_name`` (as recorded in the index),
    ``path`` (where to read it) and the size the annotation file states (None for folders)."""
    id: int | str
    file_name: str
    path: Path
    height: int | None = None
    width: int | None = None


def coco_images(ann_file, image_dir) -> list[ImageEntry]:
    """The images listed in a COCO JSON, sorted by id; ``file_name`` is relative to ``image_dir``."""
    ann_file, image_dir = Path(ann_file), Path(image_dir)
    if not image_dir.is_dir():
        raise FileNotFoundError(f"image folder {image_dir} (--images) does not exist")
    coco = load_coco(ann_file)
    records = coco.dataset.get('images') or []
    if not records:
        raise ValueError(f"COCO file {ann_file} lists no images (its 'images' list is empty or missing)")
    duplicated = [i for i, n in Counter(r['id'] for r in records).items() if n > 1]
    if duplicated:
        raise ValueError(f"COCO file {ann_file} lists image ids more than once: {duplicated[:10]}")
    return [ImageEntry(r['id'], r['file_name'], image_dir / r['file_name'], r.get('height'), r.get('width'))
            for r in sorted(records, key=lambda r: r['id'])]


def folder_images(folder) -> list[ImageEntry]:
    """The images under ``folder`` (recursively, sorted); id and file_name are the relative POSIX path."""
    folder = Path(folder)
    return [ImageEntry(p.relative_to(folder).as_posix(), p.relative_to(folder).as_posix(), p)
            for p in images_in(folder)]
