"""Completeness by content: the SHA-256 written beside a checkpoint after its data (``<file>.sha256``).

The sidecar is one line in ``sha256sum`` format (``<hex digest>  <file name>``), so ``sha256sum -c`` checks it
too. A torch checkpoint whose middle was damaged still unzips and loads (its records carry no checksum torch
verifies), so a file is trusted as complete when its digest matches the sidecar written after it; a file
without a sidecar (written by other tools) is judged by reading it.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

SUFFIX = '.sha256'
_CHUNK = 1 << 20
#: A sidecar's one line: the digest, then (as sha256sum writes it) the file's name after one or two spaces or '*'.
_LINE = re.compile(r'([0-9a-fA-F]{64})(?:[ \t]+\*?[^\n]+)?')


_MAX_LINE = 4096  # far longer than a digest and a file name


class SidecarError(ValueError):
    """A checksum sidecar that exists but cannot be read or parsed (its message says which and why)."""


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
    """The digest the sidecar of ``path`` records; None without a sidecar. Raises :class:`SidecarError` when a
    sidecar exists but cannot be read or is not in ``sha256sum`` format (this project writes it atomically, so a
    damaged one was damaged by something else, and the checkpoint cannot be verified)."""
    file = sidecar(path)
    if not os.path.lexists(file):
        return None
    if not file.is_file():  # a folder, a link to nothing, a pipe (which would block a read)
        what = 'a folder' if file.is_dir() else 'a link to nothing' if file.is_symlink() else 'not a regular file'
        raise SidecarError(f"its checksum file {file.name} exists but cannot be read: it is {what}")
    try:
        with open(file, 'rb') as f:
            data = f.read(_MAX_LINE + 1)
    except OSError as err:
        raise SidecarError(f"its checksum file {file.name} exists but cannot be read ({err.strerror or err})") from err
    text = data.decode('ascii', errors='replace')
    match = _LINE.fullmatch(text.strip())
    if match is None:
        raise SidecarError(f"its checksum file {file.name} is not one line '<64 hex digits>  <file name>' "
                           f"(sha256sum format): it holds {data[:40]!r}{'...' if len(data) > 40 else ''}")
    return match[1].lower()


def checksum_mismatch(path) -> str | None:
    """None when ``path`` has no sidecar or matches it; else a sentence saying what differs, or why its sidecar
    cannot be used (then the file cannot be verified: to trust it anyway, rewrite the sidecar with ``sha256sum``)."""
    try:
        recorded = recorded_digest(path)
    except SidecarError as err:
        return (f"{err}, so its content cannot be verified. If you know {Path(path).name} is good, rewrite the "
                f"checksum with `sha256sum {Path(path).name} > {sidecar(path).name}` in its folder")
    if recorded is None:
        return None
    actual = file_digest(path)
    if actual == recorded:
        return None
    return (f"its SHA-256 {actual[:16]}... differs from {recorded[:16]}... recorded in {sidecar(path).name} when "
            f"it was written: the file was damaged or changed since")
