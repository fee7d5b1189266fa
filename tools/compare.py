r"""Compare backbones under one experiment: the same training and evaluation, one table and one plot.

    python tools/compare.py configs/dpt_vitb_camvid.py --backbones vit_base_patch16_224 deit_small_patch16_224 \
        cvt_13_224 coatnet_0_rw_224 crossvit_small_240 --out results/compare_camvid --data-root data/camvid
    python tools/compare.py --configs configs/dpt_vitb_ade20k.py configs/dpt_cvt13_ade20k.py --out results/ade
    python tools/compare.py configs/quickstart.py --backbones vit_tiny_patch16_224 cvt_13_224 --quick   # a first try
    python tools/compare.py configs/dpt_vitt4_camvid_cpu.py --backbones vit_tiny_patch16_224 cvt_13_224 \
        --seeds 3 --budget flops:20 --out results/camvid_seeds   # 3 seeds each, equal training FLOPs
    python tools/compare.py --heads --configs configs/dpt_vitt4_camvid_cpu.py configs/eomt_vitt4_camvid_cpu.py \
        --backbones vit_tiny_patch16_224 deit_tiny_patch16_224 --seeds 3   # heads x backbones, one table

With --backbones the config's model.backbone is replaced by each named zoo backbone (its default taps;
NAME:{"depth": 4} adds options). With --configs the configs must be identical except model.backbone; the tool
refuses otherwise and lists the keys that differ. With --heads the configs (one per head) may differ in the model,
custom_hooks and optim_wrapper.paramwise_cfg.custom_keys only (data, schedule, optimizer, evaluation and input
normalisation identical), and with --backbones too every head is trained on every backbone (rows 'config+backbone').
A config's run is named by its file's stem; configs of one stem by the shortest tail of their paths that tells them
apart (a/exp.py b/exp.py: a-exp, b-exp); a file given twice is refused.
Each backbone trains in OUT/<name> through mmengine's Runner; a finished backbone is not rerun (its result.json is
read back) and an interrupted one resumes from its last checkpoint, but only for the same settings: a result records
what produced it (the resolved config's digest, iterations, seed), and a run made or started with other settings (or
whose result.json / scalars.json is damaged) is named, moved aside into OUT/<name>/superseded-<k>/ and trained
again.
Writes OUT/compare.md, OUT/compare.csv and OUT/compare.png (the validation metric against GMACs and
against forward throughput).

Repeated runs (--seeds N): each backbone trains N times, seeds k = s .. s+N-1 (s: the config's randomness.seed),
in OUT/<name>/seed<k>; seed k gives every backbone the same data order and augmentation. The table reports each
metric's mean, standard deviation (<metric>_std) and 95% confidence interval (mean +- <metric>_ci95, Student's t),
the plot draws the intervals, and a second table tests every pair (paired t-test over seeds, Holm-adjusted:
tools/lab/benchmark/stats.py says why). An interrupted comparison reruns only the runs without a result.json.

Budgets (--budget): 'iters' (default: the config's max_iters for all), 'iters:N' (N for all), 'flops:T' (T TFLOP of
training each: 3 x forward MACs x 2 per image) or 'time:S' (S seconds of forward+backward each, timed here); the
schedule is rescaled to each backbone's length (tools/lab/benchmark/budget.py).

Speed columns: forward_img_s is timed at the training crop in rounds alternating with a 2048^3 matmul, so a busy
machine shows as a low matmul rate; a row measured at under 75% of the best matmul rate of the table is marked in
the busy column and its speeds should be measured again. train_img_s is the mean of the logged training iteration
times (after the first logged window, which includes start-up).

Each run trained (not read back) is one record of series compare in the results store: settings the experiment
(config), the backbone (the row's name), iterations, seed and --cfg-options; metrics the run's final validation
metrics, speeds and wall_s.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from mmengine.config import DictAction

from lab.cli import positive

QUICK_ITERS, QUICK_VAL_SAMPLES = 20, 16


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('config', nargs='?', help='the experiment whose backbone --backbones replaces')
    parser.add_argument('--backbones', nargs='+', metavar='NAME',
                        help='zoo names (python tools/list_models.py), optionally NAME:{"option": value}')
    parser.add_argument('--configs', nargs='+', metavar='CONFIG', help='experiments identical except model.backbone')
    parser.add_argument('--heads', action='store_true',
                        help='compare heads: --configs may differ in the model (and custom_hooks); with --backbones '
                             'each config is trained on each backbone')
    parser.add_argument('--out', default='results/compare', help='output folder (one work dir per backbone)')
    parser.add_argument('--data-root', help="override every dataset's data_root")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE', default=None,
                        help='overrides applied to every experiment, e.g. train_cfg.max_iters=200')
    parser.add_argument('--metric', help='the validation metric to plot (default: mIoU, else the first one)')
    parser.add_argument('--seeds', type=positive, default=1, metavar='N',
                        help='runs per backbone with seeds s..s+N-1 (s: the config\'s randomness.seed); N >= 2 adds '
                             'standard deviations, 95%% intervals and pairwise tests')
    parser.add_argument('--budget', default='iters', metavar='iters[:N]|flops:TFLOP|time:SECONDS',
                        help="the config's iterations (default) or N for every run (the schedule rescaled), equal "
                             "training TFLOP, or equal training seconds per backbone")
    parser.add_argument('--quick', action='store_true',
                        help=f'a first try: at most {QUICK_ITERS} training iterations, validation on the first '
                             f'{QUICK_VAL_SAMPLES} samples (numbers for a smoke test, not for a comparison)')
    return parser


def main(argv=None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    grid = args.heads and args.configs and args.backbones
    if not grid and (bool(args.backbones) == bool(args.configs) or (args.backbones and not args.config)):
        parser.error('give CONFIG --backbones NAME ..., or --configs CONFIG CONFIG ... (with --heads, optionally '
                     '--backbones NAME ... too)')
    if args.config and args.configs:
        parser.error('give either CONFIG or --configs, not both')
    from tqdm import tqdm

    from lab.benchmark.budget import parse_budget
    from lab.benchmark.compare import (
        backbone_configs,
        check_only_backbones_differ,
        config_labels,
        head_backbone_grid,
        metric_names,
        plot,
        quick,
        run_backbone,
        significance_table,
        write_table,
    )
    try:
        budget = parse_budget(args.budget)
    except ValueError as error:
        parser.error(str(error))
    from heads.engine.launch import load_config
    load = lambda path: load_config(path, args.cfg_options, None, args.data_root)  # noqa: E731
    if args.backbones and not grid:
        configs = backbone_configs(load(args.config), args.backbones)
    else:
        try:
            labels = config_labels(args.configs)
        except ValueError as error:
            parser.error(str(error))
        configs = {label: load(path) for label, path in zip(labels, args.configs)}
        paths = dict(zip(labels, args.configs))
        check_only_backbones_differ(configs, 'heads' if args.heads else 'backbones')
        if grid:
            configs = head_backbone_grid(configs, args.backbones)
    if args.quick:
        for cfg in configs.values():
            quick(cfg, QUICK_ITERS, QUICK_VAL_SAMPLES)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, runs = [], {}
    command = shlex.join(['python', 'tools/compare.py', *(sys.argv[1:] if argv is None else argv)])
    cell = {'cfg_options': dict(args.cfg_options or {}), **({'quick': True} if args.quick else {}),
            **({'budget': args.budget} if args.budget != 'iters' else {})}
    with tqdm(total=len(configs) * args.seeds, desc='runs', unit='run') as progress:
        for name, cfg in configs.items():
            seed = (cfg.get('randomness') or {}).get('seed') or 0
            experiment = args.config or paths[name.split('+')[0]]
            record = {'series': 'compare', 'settings': {'experiment': experiment, 'backbone': name, **cell},
                      'command': command}
            rows_and_runs = run_backbone(name, cfg, out, list(range(seed, seed + args.seeds)), budget, progress,
                                         record)
            rows.append(rows_and_runs[0])
            runs[name] = rows_and_runs[1]
    metric_keys = metric_names(rows)
    metric = args.metric or ('mIoU' if 'mIoU' in metric_keys else (metric_keys or [None])[0])
    appendix = significance_table(runs, metric) if metric and args.seeds > 1 else ''
    write_table(rows, out, f'```\n{command}\n```', appendix)
    if metric:
        plot(rows, metric, out)
    print((out / 'compare.md').read_text())
    return rows


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
