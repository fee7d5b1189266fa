"""The bar a depth config must clear: the training set's mean depth predicted everywhere on its validation set,
scored by the config's own val_evaluator (a DepthMetric, with its alignment and depth range).

    python tools/depth_baseline.py configs/depth_anything_v2_vits_7scenes_cpu.py \
        --data-root ../shared/data/depth-7scenes
    python tools/depth_baseline.py configs/depth_anything_v2_vits_folder_relative.py --data-root my_rgbd/

Prints one JSON line: the config, the alignment, the training-mean depth in metres and the metrics. Under the
alignment 'scale_shift_disparity' (or 'median') a constant becomes each image's harmonic-mean (median) depth, so
the figures are those of a per-image constant fitted to the ground truth (heads/evaluation/depth_baseline.py).
The result is one record of series depth_baseline in the results store (settings: the config, --cfg-options).
"""
from __future__ import annotations

import argparse
import json

from mmengine.config import DictAction


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('config', help='a depth config (train_dataloader, val_dataloader and a DepthMetric '
                                       'val_evaluator)')
    parser.add_argument('--data-root', help="override every dataset's data_root, as tools/train.py does")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None, metavar='KEY=VALUE',
                        help='override config keys as tools/train.py does, e.g. val_evaluator.alignment=median')
    return parser


def baseline(cfg, config: str) -> dict:
    """The mean-depth predictor's figures for a loaded depth config ``cfg`` (read from ``config``): its
    alignment, frame counts, training-mean depth and metrics. Datasets wrapped in others (clips of a video:
    :class:`~heads.datasets.VideoClipDataset`) are scored on their frames, each once."""
    from heads.engine.launch import innermost_dataset
    from heads.evaluation.depth_baseline import mean_depth_baseline
    from heads.registry import DATASETS, METRICS
    metric = METRICS.build(cfg.val_evaluator)
    if not hasattr(metric, 'valid_mask'):
        raise SystemExit(f"{config}: val_evaluator is {cfg.val_evaluator.get('type')!r}, not a DepthMetric; "
                         f"this tool scores depth configs only")
    train_set = DATASETS.build(innermost_dataset(cfg.train_dataloader))
    val_set = DATASETS.build(innermost_dataset(cfg.val_dataloader))
    mean, metrics = mean_depth_baseline(train_set, val_set, metric)
    return dict(config=config, alignment=metric.alignment, train_frames=len(train_set), val_frames=len(val_set),
                train_mean_depth=round(mean, 4), metrics={k: round(v, 4) for k, v in metrics.items()})


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    from heads.engine.launch import load_config
    cfg = load_config(args.config, args.cfg_options, None, args.data_root)
    out = baseline(cfg, args.config)
    print(json.dumps(out))
    from lab.records.rows import repo_path, row_record, tool_command
    row_record('depth_baseline', {**out, **out['metrics']}, exclude=['metrics'], command=tool_command(__file__, argv),
               fixed={'config': repo_path(args.config), 'cfg_options': dict(args.cfg_options or {})})
    return out


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
