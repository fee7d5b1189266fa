r"""Compare backbones under one experiment: the same training and evaluation, one table and one plot.

    python tools/compare.py configs/dpt_vitb_camvid.py --backbones vit_base_patch16_224 deit_small_patch16_224 \
        cvt_13_224 coatnet_0_rw_224 crossvit_small_240 --out results/compare_camvid --data-root data/camvid
    python tools/compare.py --configs configs/dpt_vitb_ade20k.py configs/dpt_cvt13_ade20k.py --out results/ade
    python tools/compare.py configs/quickstart.py --backbones vit_tiny_patch16_224 cvt_13_224 --quick   # a first try

With --backbones the config's model.backbone is replaced by each named zoo backbone (its default taps;
NAME:{"depth": 4} adds options). With --configs the configs must be identical except model.backbone; the tool
refuses otherwise and lists the keys that differ. Each backbone trains in OUT/<name> through mmengine's Runner; a
finished backbone is not rerun (its result.json is read back) and an interrupted one resumes from its last
checkpoint. Writes OUT/compare.md, OUT/compare.csv and OUT/compare.png (the validation metric against GMACs and
against forward throughput).

Speed columns: forward_img_s is timed at the training crop in rounds alternating with a 2048^3 matmul, so a busy
machine shows as a low matmul rate; a row measured at under 75% of the best matmul rate of the table is marked in
the busy column and its speeds should be measured again. train_img_s is the mean of the logged training iteration
times (after the first logged window, which includes start-up).
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from mmengine.config import DictAction

QUICK_ITERS, QUICK_VAL_SAMPLES = 20, 16


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', nargs='?', help='the experiment whose backbone --backbones replaces')
    parser.add_argument('--backbones', nargs='+', metavar='NAME',
                        help='zoo names (python tools/list_models.py), optionally NAME:{"option": value}')
    parser.add_argument('--configs', nargs='+', metavar='CONFIG', help='experiments identical except model.backbone')
    parser.add_argument('--out', default='results/compare', help='output folder (one work dir per backbone)')
    parser.add_argument('--data-root', help="override every dataset's data_root")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE', default=None,
                        help='overrides applied to every experiment, e.g. train_cfg.max_iters=200')
    parser.add_argument('--metric', help='the validation metric to plot (default: mIoU, else the first one)')
    parser.add_argument('--quick', action='store_true',
                        help=f'a first try: at most {QUICK_ITERS} training iterations, validation on the first '
                             f'{QUICK_VAL_SAMPLES} samples (numbers for a smoke test, not for a comparison)')
    return parser


def main(argv=None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.backbones) == bool(args.configs) or (args.backbones and not args.config):
        parser.error('give CONFIG --backbones NAME ..., or --configs CONFIG CONFIG ...')
    from tqdm import tqdm

    from heads.benchmark.compare import backbone_configs, check_only_backbones_differ, plot, quick, run_one, write_table
    from heads.engine.launch import load_config
    load = lambda path: load_config(path, args.cfg_options, None, args.data_root)  # noqa: E731
    if args.backbones:
        configs = backbone_configs(load(args.config), args.backbones)
    else:
        configs = {Path(p).stem: load(p) for p in args.configs}
        check_only_backbones_differ(configs)
    if args.quick:
        for cfg in configs.values():
            quick(cfg, QUICK_ITERS, QUICK_VAL_SAMPLES)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [run_one(name, cfg, out) for name, cfg in tqdm(configs.items(), desc='backbones', unit='run')]
    command = shlex.join(['python', 'tools/compare.py', *(sys.argv[1:] if argv is None else argv)])
    metric_keys = write_table(rows, out, f'```\n{command}\n```')
    metric = args.metric or ('mIoU' if 'mIoU' in metric_keys else (metric_keys or [None])[0])
    if metric:
        plot(rows, metric, out)
    print((out / 'compare.md').read_text())
    return rows


if __name__ == '__main__':
    main()
