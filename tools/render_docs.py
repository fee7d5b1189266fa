"""Rewrite every marked block of README.md and docs/**/*.md from the results store (records/).

    python tools/render_docs.py            # rewrite the blocks
    python tools/render_docs.py --check    # rewrite nothing; exit 1 listing each block that differs and each row
                                           # that has no record

A block is ``<!-- records: VIEW key=value ... -->`` ... ``<!-- /records -->`` (tools/lab/records/render.py says
its arguments); each figure in it is the median over all runs of its machine kind at the current code, with the
min-max and the number of runs (tools/lab/records/views.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 when a block differs')
    parser.add_argument('--root', type=Path, default=ROOT, help='the repository whose docs to render (default: this)')
    parser.add_argument('--records', type=Path, default=None,
                        help="the store's folder (default: ROOT/records)")
    return parser


def main(argv: list[str] | None = None) -> int:
    from lab.records import render, store
    args = build_parser().parse_args(argv)
    records = store.read(args.records or args.root / 'records')
    problems = render.check(args.root, records, write=not args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f'{len(problems)} problem(s); rerun `python tools/render_docs.py` after recording what is missing'
              if args.check else f'{len(problems)} row(s) without a record', file=sys.stderr)
    return 1 if problems else 0


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(run_main(main))
