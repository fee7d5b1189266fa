"""Measurements each in a fresh process (so that its peak resident memory is its own), for the tools that run
themselves as children (``tools/benchmark_tiling.py``, ``tools/benchmark_deploy.py``): the child prints one JSON
line last; the parent reads it, or an error cell from the child's last line of stderr. Imports nothing heavy."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def rss_mib() -> float:
    """This process's resident memory now (Linux), MiB."""
    return int(Path('/proc/self/statm').read_text().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2 ** 20


def cpu_name() -> str:
    """The CPU's model name (Linux), else what platform says: the store's reading (:mod:`lab.records.machine`)."""
    from lab.records.machine import cpu_info
    return cpu_info()['cpu']


def child_result(command: list[str], timeout: float | None = None) -> dict:
    """Run ``command`` and return the JSON object of its last stdout line, or ``{'error': ...}`` with its exit status
    and last line of stderr, or with the ``timeout`` (seconds) it ran past (the child is killed)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {'error': f'did not finish within {timeout:.0f} s (stopped)'}
    if done.returncode:
        reason = [line for line in done.stderr.strip().splitlines() if line.strip()][-1:] or ['no message']
        return {'error': f'exit {done.returncode}: {reason[0][:160]}'}
    return json.loads(done.stdout.strip().splitlines()[-1])
