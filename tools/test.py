"""Evaluate a checkpoint on a config's test set: the metrics (and, for segmentation, a per-class table).

    python tools/test.py configs/dpt_vitb_camvid.py work_dirs/dpt_vitb_camvid/iter_8000.pth
    python tools/test.py CONFIG CHECKPOINT --tta --show-dir work_dirs/show    # flip TTA; pictures per image
    python tools/test.py CONFIG CHECKPOINT --out results.json                # metrics and per-class rows as JSON
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.cli import add_run_options
from lab.outputs import refuse_outputs_that_are_inputs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='the config the checkpoint was trained with')
    parser.add_argument('checkpoint', help='an mmengine .pth checkpoint or a .safetensors state dict (this '
                        "project's, or an mmseg DPT checkpoint)")
    parser.add_argument('--work-dir', help='where the evaluation log goes (default work_dirs/<config name>)')
    parser.add_argument('--show-dir', help='write [image | ground truth | prediction] pictures here')
    parser.add_argument('--tta', action='store_true', help='flip test-time augmentation')
    add_run_options(parser, 'test_dataloader.batch_size=1', 'the test set split across processes')
    parser.add_argument('--out', help='also write the metrics (and per-class rows) as JSON here')
    return parser


def main(argv=None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out, '--show-dir': args.show_dir},
                                   {'CONFIG': args.config, 'CHECKPOINT': args.checkpoint})
    from heads.engine import ZooRunner
    from heads.engine.launch import enable_compile, load_config, setup_launcher
    from heads.models.task_checkpoint import load_task_checkpoint, without_backbone_weights
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.data_root)
    if args.compile:
        enable_compile(cfg)
    if args.tta:
        cfg.model.setdefault('test_cfg', {})['flip'] = True
    if args.show_dir:
        cfg.custom_hooks = [h for h in cfg.custom_hooks if h.get('type') != 'PredictionVisualizationHook']
        cfg.custom_hooks.append(dict(type='PredictionVisualizationHook', show_dir=args.show_dir))
    cfg.load_from = None  # loaded below with weights-only semantics, .pth or .safetensors alike
    cfg.model = without_backbone_weights(cfg.model)  # the checkpoint holds the whole model
    setup_launcher(cfg, args.launcher)
    runner = build_runner(ZooRunner, cfg, args.tta)
    load_task_checkpoint(runner.model, args.checkpoint, finite=True)  # this project's layout or mmseg's; no NaN
    metrics = runner.test()  # logs the metrics (and the metric's per-class table) once
    if args.out:
        per_class = getattr(runner.test_evaluator.metrics[0], 'per_class', None)
        Path(args.out).write_text(json.dumps({**metrics, **({'per_class': per_class} if per_class else {})},
                                             indent=2))
    return metrics


def build_runner(runner_class, cfg, tta: bool):
    """The runner of ``cfg``; its model checks its test_cfg when built (heads.models.inference_mode), and a
    refusal of the flip that ``--tta`` adds names the option."""
    from heads.models.inference_mode import InferenceModeError
    try:
        return runner_class.from_cfg(cfg)
    except InferenceModeError as err:
        if not tta or err.key != 'flip':
            raise
        raise InferenceModeError(f"--tta mirrors the predictions through test_cfg flip=True, which this model does "
                                 f"not take ({err}); run without --tta", err.key) from None


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
    from heads.engine.launch import end_launch
    end_launch()  # a script's run leaves its process group before exit (main may run again in a process)
