"""A new run never writes over another run's checkpoints (``tools/train.py`` without ``--resume``).

A run from iteration 0 writes ``iter_1.pth``, ..., ``last_checkpoint``, its config, logs and predictions into its
work dir, replacing those of an earlier run there (the everyday re-run into ``work_dirs/<config name>`` with another
learning rate). So a run that does not resume stops before anything is built when its work dir holds training
checkpoints (found by name or content as ``--resume`` finds them:
:func:`~heads.engine.checkpoints.resume_search.run_checkpoints`), naming them and the ways on: ``--resume``,
another ``--work-dir``, or ``--restart``, which first moves every entry of the work dir (the earlier run's files)
into ``<work_dir>/previous_<YYYYmmdd_HHMMSS>/`` and says so; nothing is deleted. Folders moved aside before
(``previous_*``) stay where they are.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from zoo.weights.io import CheckpointError

from .resume_search import POINTER, run_checkpoints

PREVIOUS = 'previous_'


class WorkDirInUseError(CheckpointError):
    """A run without ``--resume`` into a work dir that holds an earlier run's checkpoints."""


def in_use_message(work_dir: Path, found: list[Path]) -> str:
    names = ', '.join(p.name for p in found[:8]) + (f' and {len(found) - 8} more' if len(found) > 8 else '')
    return (f"work dir {work_dir} holds checkpoints of an earlier run ({names}); a new run from iteration 0 would "
            f"write over them and its other files. Nothing was changed. Continue that run with --resume, train "
            f"into another folder with --work-dir DIR, or start over with --restart (moves the earlier run's files "
            f"into {work_dir / (PREVIOUS + '<time>')}/ first; nothing is deleted)")


def previous_folder(work_dir: Path) -> Path:
    """A new ``previous_<YYYYmmdd_HHMMSS>`` folder name in ``work_dir`` (``_2``, ``_3``, ... when taken)."""
    base = PREVIOUS + time.strftime('%Y%m%d_%H%M%S')
    folder, k = work_dir / base, 1
    while folder.exists() or folder.is_symlink():
        k += 1
        folder = work_dir / f'{base}_{k}'
    return folder


def move_earlier_run(work_dir: Path) -> tuple[Path, list[str]]:
    """Move every entry of ``work_dir`` but the ``previous_*`` folders into a new :func:`previous_folder`; returns
    it and the names moved. A moved ``last_checkpoint`` that named a moved checkpoint names it in its new place (not
    the file the new run writes under that name)."""
    folder = previous_folder(work_dir)
    entries = sorted(p for p in work_dir.iterdir() if not (p.name.startswith(PREVIOUS) and p.is_dir()))
    folder.mkdir()
    for path in entries:
        path.rename(folder / path.name)
    _repoint(folder / POINTER, work_dir, folder)
    return folder, [p.name for p in entries]


def _repoint(pointer: Path, work_dir: Path, folder: Path) -> None:
    try:
        named = Path(pointer.read_text().strip()) if pointer.is_file() else None
    except (OSError, UnicodeDecodeError):
        return  # a hint only: --resume in the folder finds the checkpoints by name and content
    if named is not None and named.is_absolute() and named.parent == work_dir and (folder / named.name).is_file():
        pointer.write_text(str(folder / named.name))


def check_earlier_run(work_dir, templates=(), restart: bool = False) -> str | None:
    """Stop with :class:`WorkDirInUseError` when ``work_dir`` holds an earlier run's checkpoints, or with
    ``restart`` move that run's files aside (:func:`move_earlier_run`) and return a line saying what went where;
    None when the work dir holds no checkpoint."""
    work_dir = Path(os.path.abspath(work_dir))  # as mmengine writes it in last_checkpoint
    found = run_checkpoints(work_dir, templates)
    if not found:
        return None
    if not restart:
        raise WorkDirInUseError(in_use_message(work_dir, found))
    folder, moved = move_earlier_run(work_dir)
    return (f"--restart: moved the earlier run's files of {work_dir} ({', '.join(moved)}) into {folder}/; "
            f"training starts from iteration 0")
