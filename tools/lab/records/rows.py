"""A measuring tool's table rows turned into records (:mod:`.store`): one record per row, i.e. per measured cell.

Every tool records the same way, through :func:`record_rows`: its rows are the dicts its table prints, the
``settings`` name the row's keys that make the cell's identity (plus ``fixed`` values the row does not hold, e.g.
``reference='timm'``), ``rounds`` names the keys holding each side's list of every timed round's seconds, and the
metrics are the row's other numeric values, exactly as measured (the table prints them rounded). The store is the
repository's ``records/`` (``ZOO_RECORDS`` names another folder, or ``off`` turns recording off; see
:func:`.store.store_dir`).
"""
from __future__ import annotations

import numbers
import shlex
from pathlib import Path

from .store import ROOT, command_line, record

#: The line each hooked tool's ``--help`` ends with.
EPILOG = ('Each measured cell is appended as one record to the results store records/<machine kind>.jsonl '
          '(tools/lab/records); ZOO_RECORDS=DIR records into DIR instead, ZOO_RECORDS=off not at all.')


def tool_command(script: str, argv: list[str] | None) -> str:
    """The command a tool was run with: ``python tools/<script> ARGS`` for the ``argv`` its ``main`` was given (a
    test's or another tool's call), or this process's command line when None (run as a script)."""
    if argv is None:
        return command_line()
    return shlex.join(['python', f'tools/{Path(script).name}', *map(str, argv)])


def repo_path(path) -> str:
    """``path`` relative to the repository when inside it (``configs/x.py``), else as given."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def device_kind(device) -> str:
    """'cuda' for any CUDA device ('cuda', 'cuda:1', torch.device), else 'cpu': the machine kind follows it."""
    return 'cuda' if str(device).startswith('cuda') else 'cpu'


def plain(value):
    """A JSON value for a setting: tuples as lists, paths as strings, numbers and strings as they are."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def row_metrics(row: dict, exclude) -> dict:
    """The row's numeric values (not bools) outside ``exclude``, as Python ints and floats (numpy's too)."""
    return {k: int(v) if isinstance(v, numbers.Integral) else float(v) for k, v in row.items()
            if k not in exclude and isinstance(v, numbers.Real) and not isinstance(v, bool)}


def row_record(series: str, row: dict, *, settings=(), fixed: dict | None = None, rounds: dict | None = None,
               metrics: dict | None = None, exclude=(), device='cpu', threads: int | None = None,
               command: str | None = None) -> Path | None:
    """Record one row: ``settings`` (row keys) and ``fixed`` make the cell, ``rounds`` maps a side ('ours',
    'reference') to the row key of its round times (a side the row lacks is left out), ``metrics`` adds values to
    the row's own numeric ones (but those named in ``exclude``). Returns the store file written (None when recording
    is off)."""
    rounds = rounds or {}
    cell = {**{k: plain(row[k]) for k in settings if k in row}, **(fixed or {})}
    times = {side: [float(t) for t in row[key]] for side, key in rounds.items() if row.get(key)}
    values = {**row_metrics(row, set(settings) | set(rounds.values()) | set(exclude)), **(metrics or {})}
    return record(series, settings=cell, rounds=times, metrics=values, command=command, threads=threads,
                  device=device_kind(device))


def record_rows(series: str, rows: list[dict], **how) -> list[Path | None]:
    """:func:`row_record` for each of ``rows`` (rows with neither round times nor numeric values are skipped: a
    refused or failed cell measured nothing)."""
    written = []
    for row in rows:
        rounds = how.get('rounds') or {}
        exclude = set(how.get('settings', ())) | set(rounds.values()) | set(how.get('exclude', ()))
        if any(row.get(key) for key in rounds.values()) or row_metrics(row, exclude) or how.get('metrics'):
            written.append(row_record(series, row, **how))
    return written


def record_run(how: dict, row: dict, wall_s: float | None = None) -> Path | None:
    """A finished training run's record (compare, evidence). ``how``: ``{'series': ..., 'settings': {...},
    'command': ...}`` (the experiment and backbone or arm; the tool's command); the row's ``iters`` and ``seed``
    join the settings; its numeric values (the final validation metrics, speeds) and ``wall_s`` (seconds of
    training and validation) are the metrics."""
    extra = {} if wall_s is None else {'wall_s': wall_s}
    return row_record(how['series'], row, settings=['iters', 'seed'], fixed=how['settings'], metrics=extra,
                      command=how.get('command'))


def record_training(cfg, *, config, cfg_options, wall_s: float, command: str, extra: dict | None = None):
    """A finished ``tools/train.py`` run as one record of series train (on the main process only): settings the
    config (repository-relative), ``cfg_options`` and the schedule's length (max_iters, or max_epochs), with
    ``extra`` (e.g. amp); metrics the final validation metrics as logged (each at its last step, from the work
    dir's scalars.json) and ``wall_s``."""
    import torch
    from mmengine.dist import is_main_process

    from heads.engine.console.logs import LogFileError, last_metrics, read_scalars
    if not is_main_process():
        return None
    try:
        metrics = last_metrics(read_scalars(cfg.work_dir))
    except (FileNotFoundError, LogFileError):  # no validation logged: the wall time alone
        metrics = {}
    length = {k: cfg.train_cfg[k] for k in ('max_iters', 'max_epochs') if cfg.get('train_cfg', {}).get(k)}
    settings = {'config': repo_path(config), 'cfg_options': dict(cfg_options or {}), **length, **(extra or {})}
    return record('train', settings=settings, metrics={**metrics, 'wall_s': wall_s}, command=command,
                  device='cuda' if torch.cuda.is_available() else 'cpu')
