"""Which checkpoint ``--resume`` (no file given) continues from, and what becomes of the other files.

- **Candidates**: the work dir's checkpoint files, whatever their names, judged by their name or content: those
  named by the checkpoint hook's ``filename_tmpl`` (``ckpt_{}.pth``) or mmengine's ``iter_*.pth`` /
  ``epoch_*.pth``, any file with a checksum sidecar, the file ``last_checkpoint`` names (a hint only: mmengine
  writes it in place, so a kill can leave it empty or naming an older file), and any other file that torch reads
  as a checkpoint (a zip or pickle holding a mapping with a ``meta`` or ``state_dict`` dict, e.g. a renamed copy
  ``backup.pth``). Not: sidecars, ``.partial`` files (removed first), files already moved aside (``.damaged``),
  ``.safetensors`` (weights only), and files of any other content whatever their suffix (``my_eval_images.tar``,
  ``notes.bin``, a flat weights file): those are left as they are, never moved or read past their first bytes
  unless they are a zip or pickle.
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
from zoo.weights.sniff import sniff

PARTIAL_SUFFIX = '.partial'
DAMAGED_SUFFIX = '.damaged'
#: Suffixes of files a user may take for checkpoints: those that are not are named in an INFO line.
CHECKPOINT_SUFFIXES = ('.pth', '.pt', '.ckpt', '.tar', '.bin')
#: The entries of which one (a dict) makes a torch file a checkpoint: mmengine's record and the weights.
STRUCTURE_KEYS = ('meta', 'state_dict')
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


def read_record(path: Path) -> Mapping | None:
    """The mapping a torch checkpoint file holds, read from its pickle (the tensors of a zip file memory-mapped,
    not read), or None when the file is not a zip or pickle by its first bytes, or torch cannot read it so
    (truncated, damaged, foreign, not a mapping)."""
    try:
        kind, _ = sniff(path)
    except OSError:
        return None
    if kind not in ('zip', 'pickle'):
        return None  # not read further: a tar of images or a text stays unread
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            value = torch.load(path, map_location='cpu', weights_only=True, mmap=kind == 'zip')
    except Exception:  # truncated, damaged, foreign: any reader error only means 'not readable as a checkpoint'
        return None
    return value if isinstance(value, Mapping) else None


def has_checkpoint_structure(record: Mapping | None) -> bool:
    """Whether a file's record (:func:`read_record`) is a checkpoint's: a ``meta`` or ``state_dict`` dict in it."""
    return record is not None and any(isinstance(record.get(key), Mapping) for key in STRUCTURE_KEYS)


def _iteration(record: Mapping | None) -> int | None:
    meta = record.get('meta') if record is not None else None
    step = meta.get('iter') if isinstance(meta, Mapping) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _scan(work_dir, templates=(), passed: list[Path] | None = None) -> dict[Path, tuple[Mapping | None, bool]]:
    """The work dir's checkpoint files (see the module docstring), each with its record and whether it carries the
    run's names (the template's, a checksum sidecar, ``last_checkpoint``'s); ``passed`` collects the files with a
    checkpoint suffix that are none by name or content (left as they are)."""
    work_dir = Path(work_dir)
    patterns = [template_pattern(t) for t in (*templates, *DEFAULT_TEMPLATES)]
    pointed = _pointed(work_dir)
    pointed = pointed.resolve() if pointed is not None else None
    found = {}
    for path in sorted(work_dir.iterdir()) if work_dir.is_dir() else ():
        name = path.name
        if (name == POINTER or name.endswith((SIDECAR_SUFFIX, PARTIAL_SUFFIX, DAMAGED_SUFFIX, '.safetensors'))
                or not path.is_file()):  # not a folder, a pipe (a read would block) or a link to nothing
            continue
        record = read_record(path)
        named = _numbered(name, patterns) or sidecar(path).exists() or path.resolve() == pointed
        if named or has_checkpoint_structure(record):
            found[path] = record, named
        elif passed is not None and name.endswith(CHECKPOINT_SUFFIXES):
            passed.append(path)
    if pointed is not None and not any(path.resolve() == pointed for path in found):
        found[pointed] = read_record(pointed), True  # outside the work dir
    return found


def checkpoint_files(work_dir, templates=(), passed: list[Path] | None = None) -> list[Path]:
    """The work dir's checkpoint files, whatever their names (see the module docstring), in no order; ``passed``
    collects the files of a checkpoint suffix that are not checkpoints (left as they are)."""
    return list(_scan(work_dir, templates, passed))


def recorded_iteration(path: Path) -> int | None:
    """``meta.iter`` recorded in a training checkpoint, read from its pickle (tensors memory-mapped, not read);
    None when the file cannot be read so or records none."""
    return _iteration(read_record(path))


def checkpoint_candidates(work_dir, templates=(), passed: list[Path] | None = None) -> list[tuple[Path, int | None]]:
    """:func:`checkpoint_files` with their recorded iterations, newest first (see the module docstring)."""
    own = [template_pattern(t) for t in templates]

    def key(item):
        path, step = item
        mtime = path.stat().st_mtime if path.exists() else 0.0
        return (step is not None, step or 0, _numbered(path.name, own), mtime)

    files = [(path, _iteration(record)) for path, (record, _) in _scan(work_dir, templates, passed).items()]
    return sorted(files, key=key, reverse=True)


def run_checkpoints(work_dir, templates=()) -> list[Path]:
    """The training checkpoints of a run in ``work_dir``, sorted by name: the candidates (see the module docstring)
    that record an iteration or carry the run's names (the template's, a checksum sidecar, ``last_checkpoint``'s),
    readable or not. A weights file (no iteration, no such name) is not one."""
    return sorted(path for path, (record, named) in _scan(work_dir, templates).items()
                  if named or _iteration(record) is not None)


WEIGHTS_ONLY = ("it records no training iteration (meta.iter): weights only, not a training checkpoint; pass it "
                "as load_from to start from it")


def latest_complete_checkpoint(work_dir, skipped: list[tuple[Path, str]] | None = None,
                               templates=(), passed: list[Path] | None = None) -> Path | None:
    """The checkpoint to resume from (see the module docstring); None when there is none. ``skipped`` collects
    (file, reason) for each candidate passed over: those before the choice, and the incomplete ones whose
    iteration could not be read (all candidates when there is no choice); ``passed`` the files of a checkpoint
    suffix that are not checkpoints by name or content (no candidates, left as they are)."""
    chosen = None
    for path, step in checkpoint_candidates(work_dir, templates, passed):
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
