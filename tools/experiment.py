"""The four exercises of a ViT course on the built-in synthetic scenes, in minutes on a CPU: a table and plots.

    python tools/experiment.py --out docs/experiments
    python tools/experiment.py --only positions --iters 100 --out results/positions

(a) registers: 0 vs 4 register tokens, the entropy and roughness of the last block's CLS attention;
(b) pre-LN vs post-LN at a high learning rate without warm-up: the loss curves;
(c) a LoRA adapter on one block's q/k/v, everything else frozen: which parameters get gradients;
(d) positions learned / sin-cos / RoPE / ALiBi / none: validation mIoU at the training size and a larger one.
Writes OUT/results.md, OUT/results.json and OUT/*.png (tools/lab/experiments.py says what each number is).
"""
from __future__ import annotations

import argparse

EXERCISES = ('registers', 'norm', 'lora', 'positions')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', default='results/experiments', help='folder for the table and plots '
                        '(default: %(default)s)')
    parser.add_argument('--only', nargs='+', choices=EXERCISES, default=list(EXERCISES),
                        help='the exercises to run (default: all)')
    parser.add_argument('--iters', type=int, default=200, help='training iterations per run (default: %(default)s)')
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    from lab.experiments import run
    return run(args.out, exercises=tuple(args.only), iters=args.iters)


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
