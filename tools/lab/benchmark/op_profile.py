"""Where two implementations of one model spend their time, operator by operator (torch.profiler, CPU self time).

:func:`op_profile` runs each zero-argument call ``runs`` times under the profiler (the order alternating, as in the
timed rounds) and sums each aten operator's self time and call count per run; :func:`profile_table` puts ours beside
the reference's, largest first, as Markdown. Self time is load-independent only in its proportions: on a busy machine
read the shares and the call counts, not the milliseconds.
"""
from __future__ import annotations

from collections import defaultdict

from torch.profiler import ProfilerActivity, profile


def op_profile(calls: list, runs: int = 1) -> list[dict[str, tuple[float, int]]]:
    """For each call: operator name -> (self CPU milliseconds per run, calls per run), over ``runs`` runs each
    (the order alternates between runs, A B, B A, ..., as :func:`zoo.profiling.interleaved_rounds`). Only aten
    operators are kept (not the profiler's Python scopes)."""
    if runs < 1:
        raise ValueError(f"op_profile needs at least one run, got runs={runs}")
    totals = [defaultdict(lambda: [0.0, 0]) for _ in calls]
    for run in range(runs):
        order = list(zip(calls, totals))
        for call, total in (order if run % 2 == 0 else reversed(order)):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                call()
            for event in prof.key_averages():
                if event.key.startswith('aten::'):
                    total[event.key][0] += event.self_cpu_time_total / 1e3
                    total[event.key][1] += event.count
    return [{op: (ms / runs, count // runs) for op, (ms, count) in total.items()} for total in totals]


def profile_table(ours: dict, ref: dict, names=('ours', 'reference'), rows: int = 20) -> str:
    """Markdown: the ``rows`` operators with the most self time in either, each side's milliseconds, share of its
    total and calls per run; the last row the totals."""
    totals = [sum(ms for ms, _ in side.values()) for side in (ours, ref)]
    ops = sorted(set(ours) | set(ref), key=lambda op: -max(ours.get(op, (0, 0))[0], ref.get(op, (0, 0))[0]))[:rows]
    header = ['op'] + [f'{n} {what}' for n in names for what in ('ms', '%', 'calls')]
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    for op in ops:
        cells = [f'`{op}`']
        for side, total in zip((ours, ref), totals):
            ms, count = side.get(op, (0.0, 0))
            cells += [f'{ms:.1f}', f'{100 * ms / total:.1f}' if total else '-', str(count)]
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines.append('| all aten ops | ' + ' | '.join(
        f'{total:.1f} | 100 | {sum(c for _, c in side.values())}' for side, total in zip((ours, ref), totals)) + ' |')
    return '\n'.join(lines)
