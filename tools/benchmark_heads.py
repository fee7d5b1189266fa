r"""Forward speed of the three heads, ours against transformers', in one process: UperNet (Swin-T), Mask2Former
(Swin-T) and EoMT (ViT-S/16, masked attention off and on), one Markdown table.

    python tools/benchmark_heads.py --size 512 512 --rounds 5 --threads 1 --out heads_cpu.md
    python tools/benchmark_heads.py --heads eomt --eomt-masked on --rounds 10

For each head, transformers' model at its documented default-sized config with random weights (seed 0) is saved with
save_pretrained and read back as ours through heads.from_pretrained_hf (the same weights; ours routed as the runner
routes it, zoo.runtime.apply_kernel_policy). The outputs are compared first: a pair that differs by more than 1e-4
of the output scale is refused (its row says so, no time; the exit status is 1). Then both forwards are timed in
interleaved rounds (ours, transformers, transformers, ours, ...), batch --batch of random fp32 images, under
torch.inference_mode; the time ratio is ours / transformers, the median of the per-round ratios (< 1: ours faster).
The header names the CPU, torch and transformers versions, the threads and the load average (1 min) at the start
and the end: a loaded machine shows there (and in the per-round seconds listed under the table). Models and outputs:
lab/benchmark/head_pairs.py. Each timed row is one record of series benchmark_heads in the results store.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
from pathlib import Path

from lab.benchmark.processes import cpu_name

HEADS = ('upernet', 'mask2former', 'eomt')  # lab.benchmark.head_pairs.HEADS (not imported here: it imports torch)
MASKS = {'both': (False, True), 'off': (False,), 'on': (True,)}


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('--heads', nargs='+', choices=HEADS, default=list(HEADS),
                        help=f"heads to measure (default: {' '.join(HEADS)})")
    parser.add_argument('--size', type=int, nargs=2, default=[512, 512], metavar=('H', 'W'),
                        help='input height and width (default: 512 512; EoMT needs a square multiple of 16)')
    parser.add_argument('--batch', type=int, default=1, help='images per forward (default: %(default)s)')
    parser.add_argument('--threads', type=int, default=None, help='torch intra-op threads (default: torch decides)')
    parser.add_argument('--rounds', type=int, default=5, help='timed rounds, interleaved (default: %(default)s)')
    parser.add_argument('--eomt-masked', choices=list(MASKS), default='both',
                        help="EoMT's masked attention: off (probabilities 0), on (1), or a row for each "
                             "(default: %(default)s)")
    parser.add_argument('--out', type=Path, default=None, help='also write the report (Markdown) to this file')
    parser.add_argument('--tiny', action='store_true',
                        help="tiny configs of the same models (the tool's own test): their times mean nothing")
    return parser


def check_args(args) -> None:
    """Refuse what cannot run, before any model is built."""
    h, w = args.size
    if min(h, w, args.batch, args.rounds) < 1 or (args.threads is not None and args.threads < 1):
        raise SystemExit('--size, --batch, --rounds and --threads must be positive')
    if 'eomt' in args.heads and (h != w or h % 16):
        raise SystemExit(f"--size {h} {w}: transformers' EoMT runs only at its configured square size, a multiple "
                         f"of its 16-pixel patches: give e.g. --size 512 512, or leave eomt out of --heads")


def header(args, threads: int, load: tuple[float, float], kernels: str) -> list[str]:
    import torch
    import transformers
    h, w = args.size
    return [f"# Heads' forward, ours vs transformers, {h}x{w}, batch {args.batch}, fp32",
            '', '```bash', 'python tools/benchmark_heads.py ' + shlex.join(args.argv), '```', '',
            f"CPU: `{cpu_name()}` ({os.cpu_count()} cores), {threads} thread{'s' * (threads > 1)}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}, {datetime.date.today()}; load "
            f"average (1 min) {load[0]:.1f} at the start, {load[1]:.1f} at the end. Ours: {kernels}."
            + (' Tiny configs (--tiny: widths, depths, queries and classes shrunk, lab/benchmark/head_pairs.py; '
               'the models below are what the full run builds): the times mean nothing.' if args.tiny else ''), '']


def main(argv=None) -> list[dict]:
    args = build_parser().parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    check_args(args)
    load_start = os.getloadavg()[0]
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    from lab.benchmark.head_pairs import DESCRIPTIONS, benchmark_head, table
    from lab.records.rows import record_rows
    from zoo.runtime.policy import describe
    rows = []
    for head in args.heads:
        found = benchmark_head(head, tuple(args.size), args.batch, args.rounds, args.tiny, MASKS[args.eomt_masked])
        for row, masked in zip(found, MASKS[args.eomt_masked] if head == 'eomt' else [None]):
            print(table([row])[-1], flush=True)
            rows.append(row)
            cell = {'head': head, 'size': '{}x{}'.format(*args.size), 'batch': args.batch, 'reference': 'transformers',
                    **({} if masked is None else {'eomt_masked': masked}), **({'tiny': True} if args.tiny else {})}
            if 'refused' not in row:  # a refused pair was not timed
                record_rows('benchmark_heads', [row], fixed=cell, exclude=['rounds'],
                            rounds={'ours': 'ours_rounds', 'reference': 'hf_rounds'})
    kernels = describe().split(';')[0]  # the kernel policy ours ran with (lab.benchmark.head_pairs.build_pair)
    lines = [*header(args, torch.get_num_threads(), (load_start, os.getloadavg()[0]), kernels), *table(rows), '',
             *(f'- {DESCRIPTIONS[head]}' for head in args.heads), '', 'Seconds of each round:', '',
             *(f"- {row['head']}: ours {' '.join(f'{t:.3f}' for t in row['ours_rounds'])}; transformers "
               f"{' '.join(f'{t:.3f}' for t in row['hf_rounds'])}" for row in rows if 'refused' not in row)]
    report = '\n'.join(lines) + '\n'
    print('\n' + report, end='')
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return rows


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(int(any('refused' in row for row in run_main(main))))
