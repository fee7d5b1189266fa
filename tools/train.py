"""Train a model from a config with mmengine's Runner.

    python tools/train.py configs/quickstart.py
    python tools/train.py configs/dpt_vitb_ade20k.py --data-root /data/ade --amp
    python tools/train.py CONFIG --resume                # continue from the work dir's last checkpoint
    python tools/train.py CONFIG --restart               # start over: the earlier run's files go to previous_<time>/
    torchrun --nproc_per_node 2 tools/train.py CONFIG --launcher pytorch
    torchrun --nproc_per_node 2 tools/train.py CONFIG --launcher pytorch --strategy fsdp   # sharded

A finished run is one record of series train in the results store: the config, --cfg-options and the schedule's
length; its final validation metrics and wall time.
"""
from __future__ import annotations

import argparse
import time

from lab.cli import add_run_options


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('config', help='an mmengine config file, e.g. configs/quickstart.py')
    parser.add_argument('--work-dir', help='where logs and checkpoints go (default work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', const='auto', default=None,
                        help='resume from this checkpoint, or (no value) from the latest in the work dir')
    parser.add_argument('--restart', action='store_true',
                        help="start from iteration 0 in a work dir that holds an earlier run's checkpoints: its files "
                             "are moved into WORK_DIR/previous_<time>/ first (nothing is deleted). Without --resume "
                             "or --restart, a run stops before writing over an earlier run's checkpoints")
    parser.add_argument('--amp', action='store_true', help='bf16 autocast (CPU or GPU)')
    parser.add_argument('--deterministic', action='store_true',
                        help='deterministic algorithms (same result on every run of the same machine)')
    add_run_options(parser, 'train_cfg.max_iters=100', 'one process per GPU, or gloo processes on CPU')
    parser.add_argument('--strategy', choices=['ddp', 'fsdp'], default='ddp',
                        help="with --launcher pytorch: 'ddp' (a whole model per process) or 'fsdp' (parameters, "
                             "gradients and optimizer state sharded over the processes; docs/distributed.md)")
    return parser


def main(argv=None):
    start = time.perf_counter()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.strategy == 'fsdp' and args.launcher == 'none':
        parser.error("--strategy fsdp shards the model over the processes of a distributed launch: run it under "
                     "torchrun with --launcher pytorch, e.g. torchrun --nproc_per_node 2 tools/train.py CONFIG "
                     "--launcher pytorch --strategy fsdp")
    if args.restart and args.resume:
        parser.error("--restart starts over from iteration 0 and --resume continues the earlier run: give one")
    from heads.engine import ZooRunner
    from heads.engine.launch import (
        enable_autocast,
        enable_compile,
        enable_deterministic,
        enable_resume,
        keep_earlier_run,
        load_config,
        setup_launcher,
    )
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.data_root)
    if args.amp:
        enable_autocast(cfg)
    if args.compile:
        enable_compile(cfg)
    if args.deterministic:
        enable_deterministic(cfg)
    if args.resume:
        enable_resume(cfg, None if args.resume == 'auto' else args.resume)
    moved = keep_earlier_run(cfg, args.restart)  # before anything is built or written
    if moved:
        print(moved, flush=True)
    setup_launcher(cfg, args.launcher, args.strategy)
    runner = ZooRunner.from_cfg(cfg)
    if moved:
        runner.logger.info(moved)  # into the log file (the console has it already)
    runner.train()
    from lab.records.rows import record_training, tool_command
    extra = {k: True for k in ('amp', 'compile', 'deterministic') if getattr(args, k)}  # what changes the figures
    if args.resume:
        extra['resumed'] = True  # the wall time is the resumed part's
    if args.launcher != 'none':
        extra.update(launcher=args.launcher, strategy=args.strategy)
    record_training(cfg, config=args.config, cfg_options=args.cfg_options, wall_s=time.perf_counter() - start,
                    command=tool_command(__file__, argv), extra=extra)
    return runner


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
    from heads.engine.launch import end_launch
    end_launch()  # a script's run leaves its process group before exit (main may run again in a process)
