"""Evaluate a checkpoint on a config's test set and print a results table.

    python tools/test.py configs/dpt_vitb_camvid.py work_dirs/dpt_vitb_camvid/iter_8000.pth
    python tools/test.py CONFIG CHECKPOINT --tta --show-dir work_dirs/show    # flip TTA; pictures per image
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import heads  # noqa: E402,F401  (registers this project's parts)
from heads.engine.launch import DictAction, load_config, setup_launcher  # noqa: E402
from zoo import load_pretrained  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint', help='an mmengine .pth checkpoint or a .safetensors state dict')
    parser.add_argument('--work-dir')
    parser.add_argument('--show-dir', help='write [image | ground truth | prediction] pictures here')
    parser.add_argument('--tta', action='store_true', help='flip test-time augmentation')
    parser.add_argument('--data-root', help="override every dataset's data_root")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None)
    parser.add_argument('--launcher', choices=['none', 'pytorch'], default='none')
    parser.add_argument('--out', help='also write the metrics as JSON here')
    return parser.parse_args(argv)


def results_table(metrics: dict, per_class=None) -> str:
    lines = ['| metric | value |', '|---|---|'] + [f'| {k} | {v:.4g} |' for k, v in metrics.items()]
    if per_class:
        keys = [k for k in per_class[0] if k != 'class']
        lines += ['', '| class | ' + ' | '.join(keys) + ' |', '|---|' + '---|' * len(keys)]
        lines += [f"| {row['class']} | " + ' | '.join(f'{row[k]:.2f}' for k in keys) + ' |' for row in per_class]
    return '\n'.join(lines)


def main(argv=None) -> dict:
    from heads.engine import ZooRunner
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.data_root)
    if args.tta:
        cfg.model.setdefault('test_cfg', {})['flip'] = True
    if args.show_dir:
        cfg.custom_hooks = [h for h in cfg.custom_hooks if h.get('type') != 'PredictionVisualizationHook']
        cfg.custom_hooks.append(dict(type='PredictionVisualizationHook', show_dir=args.show_dir))
    cfg.load_from = None  # loaded below with weights-only semantics, .pth or .safetensors alike
    setup_launcher(cfg, args.launcher)
    runner = ZooRunner.from_cfg(cfg)
    load_pretrained(runner.model, args.checkpoint, format='zoo')
    metrics = runner.test()
    per_class = getattr(runner.test_evaluator.metrics[0], 'per_class', None)
    print(results_table(metrics, per_class))
    if args.out:
        Path(args.out).write_text(json.dumps(metrics, indent=2))
    return metrics


if __name__ == '__main__':
    main()
