"""Completeness by content: the SHA-256 written beside a checkpoint after its data (``<file>.sha256``).

The sidecar is one line in ``sha256sum`` format (``<hex digest>  <file name>``), so ``sha256sum -c`` checks it
too. A torch checkpoint whose middle was damaged still unzips and loads (its records carry no checksum torch
verifies), so a file is trusted as complete when its digest matches the sidecar written after it; a file
without a sidecar (written by other tools) is judged by reading it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

SUFFIX = '.sha256'
_CHUNK = 1 << 20


def sidecar(path) -> Path:
    """The checksum file that belongs to ``path``."""
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def file_digest(path) -> str:
    """SHA-256 of the file's bytes, as hex."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sidecar_line(path, name: str | None = None) -> str:
    """The sidecar's content for ``path`` (``sha256sum`` format), naming it ``name`` (default its own name)."""
    return f"{file_digest(path)}  {name or Path(path).name}\n"


def recorded_digest(path) -> str | None:
    """The digest the sidecar of ``path`` records; None without a (readable, well-formed) sidecar."""
    try:
        text = sidecar(path).read_text(encoding='ascii')
    except (OSError, UnicodeDecodeError):
        return None
    digest = text.split(maxsplit=1)[0] if text.strip() else ''
    return digest.lower() if len(digest) == 64 and all(c in '0123456789abcdefABCDEF' for c in digest) else None


def checksum_mismatch(path) -> str | None:
    """None when ``path`` has no sidecar or matches it; else a sentence saying what differs."""
    recorded = recorded_digest(path)
    if recorded is None:
        return None
    actual = file_digest(path)
    if actual == recorded:
        return None
    return (f"its SHA-256 {actual[:16]}... differs from {recorded[:16]}... recorded in {sidecar(path).name} when "
            f"it was written: the file was damaged or changed since")
