"""The folder of one run of ``tools/compare.py`` or ``tools/evidence.py``: its result (``result.json``: the row and
the settings that produced it, :mod:`lab.benchmark.provenance`) and the settings it was started with
(``provenance.json``, with the resolved config), both written atomically
(:func:`zoo.weights.durable.write_text_durably`).

A result is read back only when its file is whole and was made with the settings asked for, and an interrupted run
is resumed only when it was started with them. Anything else (a damaged file, other settings, checkpoints of unknown
origin) is named in a warning and the run's files are moved aside into ``<run>/superseded-<k>/`` (nothing is
deleted), so that the run trains again from the start.
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

from zoo.weights.durable import write_text_durably

from .provenance import differences, summary

RESULT, STARTED = 'result.json', 'provenance.json'
ASIDE = 'superseded-'
#: Entries of a run's folder that are not the run's own files: runs of other seeds nested in it (tools/compare.py
#: with one seed trains in OUT/<name>, with several in OUT/<name>/seed<k>), the budget record, files moved aside.
NOT_THE_RUNS = re.compile(r'^(seed\d+|budget\.json|superseded-\d+)$')
FIELDS = {'config_digest': str, 'iters': (int, type(None)), 'seed': (int, type(None)), 'options': dict}


class ResultFileError(ValueError):
    """A result.json or provenance.json that is damaged or not what the tools write."""


def _kind(value) -> str:
    """A short description of a JSON value for a message (containers by type and size only)."""
    if isinstance(value, (dict, list)):
        return f'a {type(value).__name__} of {len(value)} items'
    return f'{type(value).__name__} {repr(value)[:40]}'


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except UnicodeDecodeError as error:
        raise ResultFileError(f'{path} is damaged: not UTF-8 text (byte {error.start})') from None
    except (ValueError, RecursionError) as error:
        raise ResultFileError(f'{path} is damaged: not JSON ({str(error)[:80]}; cut short by a crash?)') from None
    if not isinstance(data, dict):
        raise ResultFileError(f'{path} is damaged: it holds {_kind(data)}, not an object')
    return data


def _check_record(path: Path, record, needs_config: bool) -> None:
    if not isinstance(record, dict):
        raise ResultFileError(f"{path} has no provenance record (written by an older version, or damaged)")
    for key, kinds in (*FIELDS.items(), *([('config', dict)] if needs_config else [])):
        value = record.get(key)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ResultFileError(f"{path}: provenance field {key!r} is {_kind(value)}, not what the tools write "
                                  f"(damaged, or written by an older version)")


def read_result(path) -> dict:
    """A run's result row with its 'provenance' (config digest, iters, seed, options); ResultFileError naming the
    file when it is damaged, has no provenance, or holds anything but numbers, strings and nulls besides it."""
    path = Path(path)
    row = _load(path)
    _check_record(path, row.get('provenance'), needs_config=False)
    for key, value in row.items():
        if key != 'provenance' and not (value is None or isinstance(value, (str, int, float))):
            raise ResultFileError(f'{path}: {key!r} is {_kind(value)}, not a number, string or null (damaged?)')
    return row


def read_started(path) -> dict:
    """The settings a run was started with (provenance.json); ResultFileError naming the file when damaged."""
    path = Path(path)
    if not path.exists():
        raise ResultFileError(f'{path} is missing')
    record = _load(path)
    _check_record(path, record, needs_config=True)
    return record


def write_json(path: Path, data: dict) -> None:
    """``data`` as JSON in ``path``, atomically."""
    write_text_durably(path, json.dumps(data, indent=1))


def own_files(work_dir: Path) -> list[Path]:
    """The run's files in its folder (everything but :data:`NOT_THE_RUNS`)."""
    return sorted(p for p in work_dir.iterdir() if not NOT_THE_RUNS.match(p.name)) if work_dir.is_dir() else []


def move_aside(work_dir: Path, reason: str) -> Path:
    """Move the run's own files into a new ``superseded-<k>`` folder in ``work_dir`` and warn, naming them and
    ``reason``; returns that folder."""
    k = 1
    while (work_dir / f'{ASIDE}{k}').exists():
        k += 1
    aside = work_dir / f'{ASIDE}{k}'
    aside.mkdir()
    moved = own_files(work_dir)
    for path in moved:
        path.rename(aside / path.name)
    warnings.warn(f"{reason}. Training the run {work_dir} again from the start; its files "
                  f"({', '.join(p.name for p in moved) or 'none'}) are kept in {aside}", stacklevel=2)
    return aside


def _recorded_config(work_dir: Path, record: dict) -> dict | None:
    """The canonical config provenance.json stored for the run of ``record`` (None if unreadable or another)."""
    try:
        started = read_started(work_dir / STARTED)
    except ResultFileError:
        return None
    return started['config'] if started['config_digest'] == record.get('config_digest') else None


def prepare(work_dir, expected: dict) -> dict | None:
    """The run's result when ``work_dir/result.json`` holds it for the settings ``expected``
    (:func:`lab.benchmark.provenance.settings`); else None, with the folder ready to train: left as it is when
    its files (an interrupted run) were started with these settings, which are resumed, else moved aside."""
    work_dir = Path(work_dir)
    result = work_dir / RESULT
    if result.exists():
        try:
            row = read_result(result)
        except ResultFileError as error:
            move_aside(work_dir, str(error))
            return None
        found = differences(row['provenance'], expected, _recorded_config(work_dir, row['provenance']))
        if not found:
            return row
        move_aside(work_dir, f"{result} was made with other settings: {'; '.join(found)}")
    elif own_files(work_dir):
        try:
            started = read_started(work_dir / STARTED)
        except ResultFileError as error:
            move_aside(work_dir, f'{error}: the interrupted run cannot be resumed, it may have been trained with '
                                 f'other settings')
            return None
        found = differences(started, expected, started['config'])
        if found:
            move_aside(work_dir, f"the interrupted run in {work_dir} was started with other settings: "
                                 f"{'; '.join(found)}")
    return None


def start(work_dir: Path, expected: dict) -> None:
    """Record the settings a run is started with (before its first checkpoint)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    write_json(work_dir / STARTED, expected)


def finish(work_dir: Path, row: dict, expected: dict) -> dict:
    """Write the run's result with its provenance; returns what was written (as :func:`read_result` reads it)."""
    row = {**row, 'provenance': summary(expected)}
    write_json(work_dir / RESULT, row)
    return row
