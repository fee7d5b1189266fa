r"""Check a claim of the ViT literature at small scale, over seeds (docs/evidence.md has the results):

    python tools/evidence.py inductive_bias --seeds 3 --jobs 2 --out docs/evidence/inductive_bias
    python tools/evidence.py distillation --seeds 3 --jobs 2 --out docs/evidence/distillation
    python tools/evidence.py mae --seeds 3 --jobs 2 --out docs/evidence/mae

inductive_bias: a small CvT vs ViT-Ti (4 blocks) of similar GMACs, DPT on 25/50/100% of CamVid's training images;
distillation: ViT-Ti patch classifier vs DeiT-Ti hard-distilled from a ResNet-18 teacher trained first (once,
seed 0); mae: DPT with ViT-Ti from scratch vs fine-tuned from MAE pre-training on CamVid's train images (trained
first, once). Runs train in WORK (default work_dirs/evidence/<claim>); a run with a result.json made with the same
settings (config, iterations, seed, prerequisite) is never repeated, so an interrupted check reruns only the
missing runs; one made with other settings, or damaged, is named, moved aside (<run>/superseded-<k>/) and redone.
--jobs N trains N runs at a time, each in its own process on
one thread. Writes OUT/results.md, results.csv, results.json (mean, std, 95% CI per arm, paired t-test over seeds
against the first arm, Holm-adjusted) and OUT/<claim>.png (the intervals).
tools/lab/benchmark/evidence.py has the logic. Each run trained (not read back) is one record of series evidence
in the results store: settings the claim, arm, fraction, config, iterations, seed and --iters / --cfg-options;
metrics the run's final validation metrics and wall_s.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from mmengine.config import DictAction

from lab.cli import positive

CLAIM_NAMES = ('distillation', 'inductive_bias', 'mae')  # lab.benchmark.evidence.CLAIMS (not imported for --help)


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('claim', choices=CLAIM_NAMES, help='the claim to check (see above)')
    parser.add_argument('--seeds', type=positive, default=3, metavar='N', help='seeds 0..N-1 per arm (and fraction)')
    parser.add_argument('--out', help='where the summary goes (default: docs/evidence/<claim>)')
    parser.add_argument('--work-dir', help='where the runs train (default: work_dirs/evidence/<claim>)')
    parser.add_argument('--jobs', type=positive, default=1, help='runs at a time, one thread each (default 1)')
    parser.add_argument('--iters', type=positive, default=None,
                        help="the arms' iterations (default: their configs'); schedulers follow, one validation at the "
                             "end; the prerequisite keeps its own")
    parser.add_argument('--camvid-root', default='../shared/data/camvid', help='CamVid (images/, annotations/)')
    parser.add_argument('--patches-root', default='data/camvid_patches',
                        help='the patch set of tools/make_patch_dataset.py ... --size 64')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE', default=None,
                        help='overrides for every run, prerequisite included (e.g. train_cfg.max_iters=2)')
    return parser


def main(argv=None) -> list[dict]:
    args = build_parser().parse_args(argv)
    from heads.engine.launch import load_config
    from lab.benchmark import evidence
    claim = evidence.CLAIMS[args.claim]
    root = {'camvid': args.camvid_root, 'patches': args.patches_root}[claim.data]
    out = Path(args.out or f'docs/evidence/{args.claim}')
    work = Path(args.work_dir or f'work_dirs/evidence/{args.claim}')
    load = lambda path: load_config(path, args.cfg_options, None, root)  # noqa: E731
    command = shlex.join(['python', 'tools/evidence.py', *(sys.argv[1:] if argv is None else argv)])
    record = {'series': 'evidence', 'command': command,
              'settings': {'claim': args.claim, 'cfg_options': dict(args.cfg_options or {})}}
    start = time.time()
    records = evidence.execute(claim, load, list(range(args.seeds)), work, args.jobs, args.iters, record)
    wall = time.time() - start
    rows = evidence.summarize(records, claim.metric, list(claim.arms))
    header = (f'{claim.statement}\n\n```\n{command}\n```\n\n{claim.metric} over seeds: mean, std, 95% CI (Student t); '
              f'diff/t/p: paired t-test over seeds of the arm minus {next(iter(claim.arms))}, p Holm-adjusted over '
              f'the {sum("p" in r for r in rows)} test(s).')
    extra = (evidence.costs(claim, load) + f'\nWall time of this invocation: {wall / 60:.1f} min (runs already '
             f'finished are read back, not retrained).\n')
    evidence.write(rows, records, out, header, extra)
    evidence.plot(rows, records, claim.metric, out, args.claim)
    print((out / 'results.md').read_text())
    return rows


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
