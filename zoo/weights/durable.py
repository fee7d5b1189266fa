"""Atomic, durable file replacement: what checkpoints and feature shards are written with.

``replace_durably(partial, final, checksum=True)`` also writes ``final``'s SHA-256 beside it *after* the data
(:mod:`zoo.weights.checksum`), so that a reader can verify by content that the file is the one written whole.
``write_text_durably(path, text)`` writes a small text file (a result, a record) the same way.
"""
from __future__ import annotations

import os
from pathlib import Path

from .checksum import sidecar, sidecar_line


def _fsync_directory(path: Path) -> None:
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def replace_durably(partial: Path, final: Path, checksum: bool = False) -> None:
    """Flush the finished ``partial`` file to disk, rename it to ``final`` (atomic: readers see the old file or the
    whole new one) and flush the directory entry, so that a crash leaves either file complete.

    ``checksum``: the old sidecar goes before the rename (a crash then leaves a file without a sidecar, which
    readers judge by reading it, never a new file with the old file's digest) and the new one after it.
    """
    partial, final = Path(partial), Path(final)
    with open(partial, 'rb') as f:
        os.fsync(f.fileno())
    if checksum:
        sidecar(final).unlink(missing_ok=True)
        line = sidecar_line(partial, final.name)
    os.replace(partial, final)
    _fsync_directory(final.parent)
    if checksum:
        written = sidecar(partial)  # '<name>.partial.sha256': never mistaken for a finished sidecar
        try:
            written.write_text(line, encoding='ascii')
            with open(written, 'rb') as f:
                os.fsync(f.fileno())
            os.replace(written, sidecar(final))
        finally:
            written.unlink(missing_ok=True)
        _fsync_directory(final.parent)


def write_text_durably(path, text: str) -> None:
    """Write ``text`` to ``path`` through ``<path>.partial`` and :func:`replace_durably`: a crash leaves the old file
    or the whole new one, never a truncated one."""
    path = Path(path)
    partial = path.with_name(path.name + '.partial')
    try:
        partial.write_text(text, encoding='utf-8')
        replace_durably(partial, path)
    finally:
        partial.unlink(missing_ok=True)
