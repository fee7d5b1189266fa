"""The one way folders of data are searched here: every file under a folder, recursively, following symbolic links
to folders (pathlib's ``rglob`` before Python 3.13 and ``os.walk`` by default skip them silently, so a dataset
laid out with ``rgb/seq-01 -> /disk2/seq-01`` lost those frames). A link back to a folder already being walked
(a cycle) is not entered again: its files are listed once, under the first path that reached them.

Used by the datasets' listings (:mod:`heads.io.depth`, :func:`heads.datasets.base.list_files`), by
``tools/check_dataset.py`` through them, and by :func:`heads.io.images.images_in` (``tools/infer.py``'s folders).
"""
from __future__ import annotations

import os
from pathlib import Path


def files_under(folder) -> list[Path]:
    """Every file under ``folder`` (recursively, symbolic links to folders followed, cycles entered once), sorted;
    [] when ``folder`` is not a folder. Paths keep the names they were reached by (``folder/link/x.png``)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found: list[Path] = []
    seen: set[str] = set()
    for top, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:  # a link back into what is walked (or a second link to one folder): listed already
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        found += [Path(top) / name for name in files if os.path.isfile(os.path.join(top, name))]
    return sorted(found)
