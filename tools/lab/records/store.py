"""Appending records to the store and reading them back.

A record is one run of one measurement, one JSON line in ``<store>/<kind>.jsonl``::

    {"series": "dpt_vitb_train_step", "settings": {"size": 512, "batch": 2},   # what was measured
     "rounds": {"ours": [6.26, 6.31], "reference": [9.5, 9.6]},                # every round's time, both sides (s)
     "metrics": {"ratio": 0.66},                                               # values derived or measured once
     "command": "python tools/benchmark.py ...", "date": "2026-12-05T14:30:00Z",
     "commit": "<sha>", "dirty": false, "code": {"zoo": "<tree sha>", "heads": "<tree sha>"},
     "versions": {"torch": "2.14.1", ...}, "threads": 2, "env": {"GLIBC_TUNABLES": ...},
     "kernels": {"gemm": "onednn", "conv_weight_grad": "gemm"}, "machine": {...}, "kind": "cpu-amd-epyc-avx512-2c"}

``code`` holds git's tree hashes of the measured packages, so that figures are aggregated only over runs of the same
code. The store is the repository's ``records/`` folder; ``ZOO_RECORDS`` names another (the tests point it at a
temporary folder, so that no test writes into the committed store) or, set to ``off``, turns recording off.
Records are only ever appended: nothing here rewrites a line.
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .machine import kind, machine

ROOT = Path(__file__).resolve().parents[3]
#: Packages whose versions every record carries (those installed).
PACKAGES = ('torch', 'torchvision', 'timm', 'transformers', 'mmengine', 'onnx', 'onnxruntime', 'numpy')
#: Environment variables that change what a measurement runs (kernels, threads, the allocator).
ENVIRONMENT = ('ZOO_CPU_GEMM', 'ZOO_CONV_WEIGHT_GRAD', 'GLIBC_TUNABLES', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS')
#: The packages whose code a figure measures: their git tree hashes make a record's ``code``.
CODE = ('zoo', 'heads')


class RecordError(ValueError):
    """A store file or a record that cannot be read or written: names the file (and line) and what was wrong."""


def store_dir() -> Path | None:
    """Where records go: ``ZOO_RECORDS`` if set (None when it is ``off``), else the repository's ``records/``."""
    value = os.environ.get('ZOO_RECORDS')
    if value is None:
        return ROOT / 'records'
    return None if value.strip().lower() == 'off' else Path(value)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def code_state() -> dict:
    """The commit, whether the measured packages have uncommitted changes, and their tree hashes (None outside git)."""
    commit = _git('rev-parse', 'HEAD')
    if commit is None:
        return {'commit': None, 'dirty': None, 'code': None}
    dirty = bool(_git('status', '--porcelain', '--', *CODE))
    trees = {name: _git('rev-parse', f'HEAD:{name}') for name in CODE}
    return {'commit': commit, 'dirty': dirty, 'code': trees}


def versions() -> dict:
    """The installed versions of :data:`PACKAGES`."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def run_state() -> dict:
    """What this process ran with beyond its code: :data:`ENVIRONMENT`'s variables that are set, and the CPU kernel
    policy's choices once zoo.runtime is in use (fp32 GEMMs by oneDNN or torch; conv weight gradients by oneDNN or
    shifted GEMMs, timed per process: two hosts of one machine kind chose differently and a DPT training step moved
    by a third)."""
    state = {'env': {name: os.environ[name] for name in ENVIRONMENT if name in os.environ},
             'load': [round(v, 2) for v in os.getloadavg()]}   # 1, 5, 15 min when the record is made: a busy run shows
    if 'zoo.runtime.gemm' in sys.modules:
        from zoo.runtime import conv_grad, gemm
        state['kernels'] = {'gemm': 'onednn' if gemm.uses_onednn() else 'torch',
                            'conv_weight_grad': conv_grad.decided()}
    return state


def command_line(argv: list[str] | None = None) -> str:
    """The command as it would be typed again: ``python tools/x.py ...`` (the script relative to the repository)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and Path(argv[0]).suffix == '.py':
        script = Path(argv[0]).resolve()
        argv[0] = str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else argv[0]
        argv.insert(0, 'python')
    return shlex.join(argv)


def make_record(series: str, *, settings: dict, rounds: dict | None = None, metrics: dict | None = None,
                command: str | None = None, threads: int | None = None, device: str = 'cpu') -> dict:
    """One record (see the module docstring); ``rounds`` maps a side ('ours', 'reference', ...) to every round's
    value, ``metrics`` holds single values. Neither may be empty both."""
    if not rounds and not metrics:
        raise RecordError(f'a record of {series!r} needs rounds or metrics; both are empty')
    if threads is None:
        import torch
        threads = torch.get_num_threads()
    info = machine(device)
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    return {'series': series, 'settings': settings, 'rounds': rounds or {}, 'metrics': metrics or {},
            'command': command or command_line(), 'date': now, **code_state(), 'versions': versions(),
            'threads': threads, **run_state(), 'machine': info, 'kind': kind(info)}


def append(record: dict, store: Path | None = None) -> Path | None:
    """Append ``record`` to its kind's file in ``store`` (:func:`store_dir` when None); returns the file, or None
    when recording is off. The line is written whole with one call, so concurrent writers never interleave."""
    store = store_dir() if store is None else store
    if store is None:
        return None
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{record['kind']}.jsonl"
    line = json.dumps(record, sort_keys=True, separators=(',', ':')) + '\n'
    with open(path, 'a', encoding='utf-8') as f:
        f.write(line)
    return path


def record(series: str, **fields) -> Path | None:
    """Make a record (:func:`make_record`'s arguments) and append it to the store; returns the file written."""
    store = fields.pop('store', None)
    return append(make_record(series, **fields), store)


def read(store: Path | None = None, kinds: list[str] | None = None) -> list[dict]:
    """Every record in ``store`` (of ``kinds`` when given), in file order; a line that is no record is an error
    naming the file and line."""
    store = store_dir() if store is None else store
    if store is None or not store.exists():
        return []
    found = []
    for path in sorted(store.glob('*.jsonl')):
        if kinds is not None and path.stem not in kinds:
            continue
        for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as error:
                raise RecordError(f'{path}:{number}: not JSON ({error.msg}); fix or remove the line') from None
            missing = {'series', 'settings', 'rounds', 'metrics', 'kind'} - set(entry)
            if missing or entry['kind'] != path.stem:
                why = f'lacks {sorted(missing)}' if missing else f"is of kind {entry['kind']!r}, not the file's"
                raise RecordError(f'{path}:{number}: the record {why}; records are written by the measuring tools')
            found.append(entry)
    return found
