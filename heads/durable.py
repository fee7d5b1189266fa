"""Atomic, durable file replacement: what checkpoints and feature shards are written with."""
from __future__ import annotations

import os
from pathlib import Path


def replace_durably(partial: Path, final: Path) -> None:
    """Flush the finished ``partial`` file to disk, rename it to ``final`` (atomic: readers see the old file or the
    whole new one) and flush the directory entry, so that a crash leaves either file complete."""
    with open(partial, 'rb') as f:
        os.fsync(f.fileno())
    os.replace(partial, final)
    directory = os.open(Path(final).parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
