"""Backfill the results store from the figures typed into docs/benchmarks.md and docs/benchmarks/*.md.

    python tools/import_benchmark_docs.py            # append the imported records to records/<kind>.jsonl
    python tools/import_benchmark_docs.py --list     # print what it imports and what it leaves in prose

The parsing is tools/lab/records/importer.py's: each row of a tool's table is one run, marked ``imported_from``.
It refuses to run twice (the store would count each run twice).
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--list', action='store_true', help='print, write nothing')
    parser.add_argument('--records', type=Path, default=ROOT / 'records', help='the store (default: records/)')
    return parser


def main(argv: list[str] | None = None) -> list[dict]:
    from lab.records import importer, store
    parser = build_parser()
    args = parser.parse_args(argv)
    records, skipped = importer.import_docs()
    for line in skipped:
        print('left in prose:', line)
    print(', '.join(f'{kind}: {n}' for kind, n in sorted(Counter(r['kind'] for r in records).items())))
    if not args.list:
        if any('imported_from' in r for r in store.read(args.records)):
            parser.error(f'{args.records} already holds imported records; remove them first to import again')
        for entry in records:
            store.append(entry, args.records)
    return records


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
