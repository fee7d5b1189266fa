"""What the measuring tools' tests check of the records a run appended (tools/lab/records): a store of the test's
own, the records of one series, and a record's values against the cells its table printed."""
from __future__ import annotations

from pathlib import Path

from lab.benchmark.tables import format_value
from lab.records import store


def own_store(monkeypatch, tmp_path: Path) -> Path:
    """A store folder of this test's (inherited by the tools' subprocesses)."""
    folder = tmp_path / 'records'
    monkeypatch.setenv('ZOO_RECORDS', str(folder))
    return folder


def series_records(folder: Path, series: str) -> list[dict]:
    """The records of ``series`` in ``folder``, each checked to carry the command, threads, versions and code."""
    found = [r for r in store.read(folder) if r['series'] == series]
    for entry in found:
        assert entry['command'] and entry['threads'] >= 1 and entry['versions']['torch'] and entry['date']
    return found


def assert_printed(entry: dict, row_cells: dict) -> None:
    """Each metric named in ``row_cells`` (metric -> the cell the table printed) prints as that cell."""
    for key, cell in row_cells.items():
        assert format_value(entry['metrics'][key]) == cell, (key, entry['metrics'][key], cell)
