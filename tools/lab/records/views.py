"""Figures from the store: runs aggregated per cell, and the one view the docs' blocks use, a table.

A cell is (series, settings, kind): its figure is the median over *all runs at the current code* (the records whose
``code`` equals that of the cell's newest record), with the min-max and the number of runs; a goal is called met or
not from that median, never from the best run. A run's value of a column: ``ratio`` is the tool's own ratio where
the record holds one (``metrics['ratio']``), else the median of its 'ours' rounds over the median of its 'reference'
rounds (inverted for the backbone series, whose ratio is reference time / ours as the tool prints it); ``ours_s`` and
``ref_s`` are the medians of the rounds; any other name is a metric.
"""
from __future__ import annotations

import datetime
import operator
import re
import statistics
from dataclasses import dataclass

#: Series whose ratio is reference time / ours (> 1: ours faster), as the tool prints it.
SPEEDUP = {'benchmark.reference'}
ROUNDS = {'ours_s': 'ours', 'ref_s': 'reference'}
GOAL = re.compile(r'^(\w+)(>=|<=|>|<)([-+0-9.e]+)$')
COMPARE = {'>=': operator.ge, '<=': operator.le, '>': operator.gt, '<': operator.lt}


class ViewError(ValueError):
    """A block's arguments that cannot make a table: names the argument and what it should be."""


@dataclass
class Figure:
    """One column of one cell over its runs at the current code."""
    median: float
    low: float
    high: float
    n: int


def when(record: dict) -> datetime.datetime:
    return datetime.datetime.fromisoformat(record.get('date') or '1970-01-01T00:00:00+00:00')


def current_runs(records: list[dict]) -> list[dict]:
    """The records of one cell whose code is the newest record's code (imported ones, of unknown code, together)."""
    if not records:
        return []
    code = max(records, key=when).get('code')
    return [r for r in records if r.get('code') == code]


def run_value(record: dict, name: str) -> float | None:
    """One run's value of column ``name`` (see the module docstring), or None where the run has none."""
    rounds, metrics = record.get('rounds') or {}, record.get('metrics') or {}
    if name in ROUNDS:
        values = rounds.get(ROUNDS[name])
        return statistics.median(values) if values else None
    if name == 'ratio' and 'ratio' not in metrics and rounds.get('ours') and rounds.get('reference'):
        ours, reference = statistics.median(rounds['ours']), statistics.median(rounds['reference'])
        return reference / ours if record.get('series') in SPEEDUP else ours / reference
    value = metrics.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def figure(runs: list[dict], name: str) -> Figure | None:
    """Median, min-max and n of column ``name`` over ``runs`` (those that hold it); None when none does."""
    values = [v for v in (run_value(r, name) for r in runs) if v is not None]
    if not values:
        return None
    return Figure(statistics.median(values), min(values), max(values), len(values))


def number(value: float) -> str:
    """Three significant digits, all of an integer part: 0.781, 1.00, 40.0, 1212, 2.1e-10."""
    if value == 0 or 1e-3 <= abs(value) < 1e15:
        digits = max(3, len(str(int(abs(value)))))
        return f'{value:#.{digits}g}'.rstrip('.')
    return f'{value:.2g}'


def cell(fig: Figure | None, runs: int) -> str:
    """'median (min-max)', with 'n=' where fewer than the row's ``runs`` hold this column."""
    if fig is None:
        return '—'
    spread = [] if fig.low == fig.high else [f'{number(fig.low)}-{number(fig.high)}']
    spread += [f'n={fig.n}'] if fig.n != runs else []
    return number(fig.median) + (f" ({', '.join(spread)})" if spread else '')


def matches(record: dict, series: str, kind: str, settings: dict, threads: str | None) -> bool:
    return (record['series'] == series and record['kind'] == kind
            and {k: str(v) for k, v in record['settings'].items()} == settings
            and (threads is None or str(record.get('threads')) == threads))


def parse_goal(text: str | None) -> tuple | None:
    if text is None:
        return None
    found = GOAL.match(text)
    if not found:
        raise ViewError(f"goal={text!r}: write it as COLUMN OP NUMBER, e.g. goal=ratio>=1.2 (OP: >= <= > <)")
    return found.group(1), found.group(2), float(found.group(3))


def table(records: list[dict], args: dict) -> tuple[str, list[str]]:
    """The Markdown table of a block (its ``args``: see :mod:`.render`) and the rows that have no record."""
    args = dict(args)
    try:
        series, kinds = args.pop('series')[-1], args.pop('kind')[-1].split(',')
        keys, columns = args.pop('rows')[-1].split(','), args.pop('columns')[-1].split(',')
    except KeyError as missing:
        raise ViewError(f'a table needs {missing.args[0]}=...; it has {sorted(args)}') from None
    rows = [r.split(',') for r in args.pop('row', [])]
    goal = parse_goal(args.pop('goal', [None])[-1])
    threads = args.pop('threads', [None])[-1]
    missing_text = args.pop('missing', [None])[-1]
    fixed = {k: v[-1] for k, v in args.items()}
    for row in rows:
        if len(row) != len(keys):
            raise ViewError(f"row={','.join(row)}: {len(row)} values for rows={','.join(keys)}")
    header = (['machine'] if len(kinds) > 1 else []) + keys + columns + ['runs'] + (['goal'] if goal else [])
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    absent = []
    for kind in kinds:
        for row in rows:
            settings = {**fixed, **dict(zip(keys, row))}
            runs = current_runs([r for r in records if matches(r, series, kind, settings, threads)])
            figures = {name: figure(runs, name) for name in columns}
            if not runs:
                absent.append(f'{kind}: {settings}')
                cells = [missing_text or 'no record'] * len(columns) + ['0']
            else:
                cells = [cell(figures[name], len(runs)) for name in columns] + [str(len(runs))]
            if goal:
                fig = figures.get(goal[0]) or figure(runs, goal[0])
                cells.append('—' if fig is None else 'met' if COMPARE[goal[1]](fig.median, goal[2]) else 'not met')
            lines.append('| ' + ' | '.join(([kind] if len(kinds) > 1 else []) + row + cells) + ' |')
    if missing_text:
        absent = []
    return '\n'.join(lines) + '\n', absent


VIEWS = {'table': table}
