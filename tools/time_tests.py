"""Run the test suite, its fast lane or CI's whole script, and append the wall time to the results store.

    python tools/time_tests.py fast_lane     # python -m pytest -q -m "not slow"
    python tools/time_tests.py suite         # python -m pytest -q (what CI runs after installing)
    python tools/time_tests.py ci            # .ci/run: fresh virtual environment, lint, suite, data-free re-run

One record of series ``ci`` (settings: ``what``; metrics: ``wall_s``, ``minutes``, ``passed``, ``failed``,
``skipped``) goes to records/<machine kind>.jsonl, also when tests fail (the counts say so); README's and
docs/benchmarks.md's test times are rendered from these records (tools/render_docs.py). The command's own output
is passed through. ZOO_RECORDS=DIR records into DIR instead, ZOO_RECORDS=off not at all.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    'fast_lane': [sys.executable, '-m', 'pytest', '-q', '-m', 'not slow', '-p', 'no:cacheprovider'],
    'suite': [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider'],
    'ci': ['bash', '.ci/run'],
}
#: pytest's last line: '1 failed, 2438 passed, 3 skipped, 16 warnings in 1864.45s (0:31:04)'.
COUNT = re.compile(r'(\d+) (passed|failed|skipped|errors?)\b')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('what', choices=list(COMMANDS), help='which run to time')
    return parser


def counts(output: str) -> dict:
    """The counts of pytest's last summary line in ``output`` (zeros when there is none)."""
    found = {'passed': 0, 'failed': 0, 'skipped': 0, 'errors': 0}
    summary = [line for line in output.splitlines() if re.search(r' in [\d.]+s', line) and COUNT.search(line)]
    for number, word in COUNT.findall(summary[-1] if summary else ''):
        found['errors' if word.startswith('error') else word] += int(number)
    return found


def main(argv: list[str] | None = None) -> int:
    from lab.records import store
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.what]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    for line in process.stdout:
        sys.stdout.write(line)
        output.append(line)
    status = process.wait()
    wall = time.perf_counter() - start
    found = counts(''.join(output))
    path = store.record('ci', settings={'what': args.what}, command=f'python tools/time_tests.py {args.what}',
                        metrics={'wall_s': round(wall, 1), 'minutes': round(wall / 60, 2), 'exit': status, **found},
                        threads=int(os.environ.get('OMP_NUM_THREADS', 0)) or os.cpu_count())
    print(f'{args.what}: {wall / 60:.1f} min, exit {status}, {found}; recorded in {path}', file=sys.stderr)
    return status


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(run_main(main))
