"""Which checkpoint ``--resume`` (no file given) continues from, and what becomes of the other files.

- **Candidates**: every checkpoint file of the work dir, whatever its name: those named by the checkpoint hook's
  ``filename_tmpl`` (``ckpt_{}.pth``) or mmengine's ``iter_*.pth`` / ``epoch_*.pth``, any ``.pth`` / ``.pt`` /
  ``.ckpt`` / ``.tar`` / ``.bin`` file, any file with a checksum sidecar, and the file ``last_checkpoint`` names
  (a hint only: mmengine writes it in place, so a kill can leave it empty or naming an older file). Not: sidecars,
  ``.partial`` files (removed first), files already moved aside (``.damaged``), ``.safetensors`` (weights only).
- **Order**: newest first by the iteration recorded inside (``meta.iter``), read from the pickle alone (the tensors
  are memory-mapped, not read), so a renamed or differently named checkpoint is placed right; ties go to the
  name matching the run's template, then the newer modification time. Files whose record cannot be read come last.
- **Choice**: the first complete one (:func:`incomplete_reason`: its content matches its checksum or, without one,
  it reads whole) that is a training checkpoint (it records its iteration).
- **Kept**: the candidates passed over as incomplete or damaged (newer than the choice, or of no readable
  iteration) are moved aside to ``NAME.damaged`` (their sidecar
  to ``NAME.damaged.sha256``), so the resumed run, which writes the same names again, overwrites none of them.
  With candidates but none complete, :class:`NoCompleteCheckpointError` lists them and nothing is changed (a run
  from iteration 0 would overwrite them); a work dir without any checkpoint file starts from the beginning.
"""
from __future__ import annotations

import re
import string
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch

from zoo.weights.checksum import SUFFIX as SIDECAR_SUFFIX
from zoo.weights.checksum import checksum_mismatch, sidecar
from zoo.weights.io import CheckpointError, read_file

PARTIAL_SUFFIX = '.partial'
DAMAGED_SUFFIX = '.damaged'
CHECKPOINT_SUFFIXES = ('.pth', '.pt', '.ckpt', '.tar', '.bin')
DEFAULT_TEMPLATES = ('iter_{}.pth', 'epoch_{}.pth')
POINTER = 'last_checkpoint'


class NoCompleteCheckpointError(CheckpointError):
    """``--resume`` found checkpoint files in the work dir but none it can continue from."""


def incomplete_reason(path: Path) -> str | None:
    """None when ``path`` is a whole checkpoint: its content matches the checksum written after it or, without
    one (older or foreign files), it unzips and reads; else why not."""
    if not path.is_file():
        return "it does not exist"
    damaged = checksum_mismatch(path)
    if damaged:
        return damaged
    if sidecar(path).is_file():
        return None
    if not zipfile.is_zipfile(path):
        return "it is truncated or not a torch checkpoint"
    try:
        read_file(path)
    except (CheckpointError, OSError) as err:
        return str(err)
    return None


def template_pattern(template: str) -> re.Pattern:
    """A regex of the names ``template.format(n)`` gives, capturing n (``'ckpt_{}.pth'`` -> ``ckpt_(\\d+)\\.pth``)."""
    parts = [re.escape(text) + (r'(\d+)' if field is not None else '')
             for text, field, _, _ in string.Formatter().parse(template)]
    return re.compile(''.join(parts))


def _numbered(name: str, patterns: list[re.Pattern]) -> bool:
    return any(p.fullmatch(name) for p in patterns)


def _pointed(work_dir: Path) -> Path | None:
    pointer = work_dir / POINTER
    try:
        named = pointer.read_text().strip() if pointer.is_file() else ''
    except (OSError, UnicodeDecodeError):
        return None
    return Path(named) if named and '://' not in named and Path(named).is_file() else None


def checkpoint_files(work_dir, templates=()) -> list[Path]:
    """The work dir's checkpoint files, whatever their names (see the module docstring), in no order."""
    work_dir = Path(work_dir)
    patterns = [template_pattern(t) for t in (*templates, *DEFAULT_TEMPLATES)]
    found = set()
    for path in work_dir.iterdir() if work_dir.is_dir() else ():
        name = path.name
        if (name == POINTER or name.endswith((SIDECAR_SUFFIX, PARTIAL_SUFFIX, DAMAGED_SUFFIX, '.safetensors'))
                or not path.is_file()):  # not a folder, a pipe (a read would block) or a link to nothing
            continue
        if _numbered(name, patterns) or name.endswith(CHECKPOINT_SUFFIXES) or sidecar(path).exists():
            found.add(path)
    pointed = _pointed(work_dir)
    if pointed is not None:
        found.add(pointed)
    return list(found)


def recorded_iteration(path: Path) -> int | None:
    """``meta.iter`` recorded in a training checkpoint, read from its pickle (tensors memory-mapped, not read);
    None when the file cannot be read so or records none."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            value = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    except Exception:  # truncated, damaged, foreign: any reader error only means 'unknown', judged later
        return None
    meta = value.get('meta') if isinstance(value, Mapping) else None
    step = meta.get('iter') if isinstance(meta, Mapping) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def checkpoint_candidates(work_dir, templates=()) -> list[tuple[Path, int | None]]:
    """:func:`checkpoint_files` with their recorded iterations, newest first (see the module docstring)."""
    own = [template_pattern(t) for t in templates]

    def key(item):
        path, step = item
        mtime = path.stat().st_mtime if path.exists() else 0.0
        return (step is not None, step or 0, _numbered(path.name, own), mtime)

    files = [(path, recorded_iteration(path)) for path in checkpoint_files(work_dir, templates)]
    return sorted(files, key=key, reverse=True)


WEIGHTS_ONLY = ("it records no training iteration (meta.iter): weights only, not a training checkpoint; pass it "
                "as load_from to start from it")


def latest_complete_checkpoint(work_dir, skipped: list[tuple[Path, str]] | None = None,
                               templates=()) -> Path | None:
    """The checkpoint to resume from (see the module docstring); None when there is none. ``skipped`` collects
    (file, reason) for each candidate passed over: those before the choice, and the incomplete ones whose
    iteration could not be read (all candidates when there is no choice)."""
    chosen = None
    for path, step in checkpoint_candidates(work_dir, templates):
        if chosen is not None and step is not None:
            continue  # older than the choice, and readable: not at risk of being overwritten, not read
        reason = incomplete_reason(path)
        if reason is None and step is not None:
            chosen = path
        elif skipped is not None and (reason or chosen is None):
            skipped.append((path, reason or WEIGHTS_ONLY))
    return chosen


def move_aside(path: Path) -> Path:
    """Rename ``path`` (and its sidecar) to ``NAME.damaged`` (``NAME.damaged.sha256``); returns the new name."""
    moved = path.with_name(path.name + DAMAGED_SUFFIX)
    if sidecar(path).exists() or sidecar(path).is_symlink():
        sidecar(path).replace(sidecar(moved))
    path.replace(moved)
    return moved


def no_complete_message(work_dir, skipped: list[tuple[Path, str]]) -> str:
    found = '; '.join(f"{path.name}: {reason}" for path, reason in skipped)
    return (f"--resume: {work_dir} holds checkpoint files but none complete to resume from ({found}). Nothing was "
            f"changed: training from iteration 0 would overwrite them. Resume from a file you trust with "
            f"--resume FILE, or move these files out of the work dir (or use another --work-dir) to start afresh")
