r"""Deployment speed and memory: each task model under PyTorch eager, torch.compile, onnxruntime fp32 and onnxruntime
int8 (dynamic quantization of the MatMuls / Gemms), batch 1 and 8, one table.

    python tools/benchmark_deploy.py --out docs/benchmarks/deploy_intel_xeon.md
    python tools/benchmark_deploy.py --models dpt_vitb_512 --batches 1 --runtimes eager onnx --repeats 3

Models (``--models``; NAME=CONFIG:HxW adds one): the task model of the config, random initialisation (seed 0: time
and memory do not depend on the weights), at the given input size. Depth Anything V2 is built with
``pos_interp='bicubic'`` (the same cost; the official 'dinov2' resampling has no exact dynamic-size export and is
refused, heads.export.limits), for every runtime of its rows alike; so is Video Depth Anything, whose batch is one
clip's frames (its graph: one clip, heads.export.wrappers.ClipOutputs). Every (model, runtime, batch) is measured in a
fresh process, so its peak resident memory is its own: seconds per forward (median of ``--repeats`` timed calls
after one untimed call), images per second, the peak resident memory and the resident memory before the first call
(model and libraries loaded). PyTorch runs the same exported module the ONNX file holds (heads.export.exportable),
under ``torch.inference_mode``; torch.compile's first call (compilation) is untimed. The ONNX file is exported once
per model (dynamic batch and size, heads.export.export_onnx) into ``--work-dir``; int8 is its dynamic quantization
(heads.export.quantize.quantize_dynamic: the Linears' weights int8, activations quantized per call), traced at the
measured size. A runtime that cannot run a model (an export refused with its reason) shows the reason in its cell, and
one that does not finish within ``--timeout`` seconds (torch.compile's first call included) says so.
Each measured cell is one record of series benchmark_deploy in the results store, with every timed call's seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lab.benchmark.processes import child_result, cpu_name, rss_mib
from lab.benchmark.tables import format_value

ROOT = Path(__file__).resolve().parents[1]
MODELS = {'dpt_vitb_512': 'configs/dpt_vitb_ade20k.py:512x512',
          'depth_anything_v2_vits_518': 'configs/depth_anything_v2_vits_7scenes.py:518x518',
          'upernet_swint_512': 'configs/upernet_swint_ade20k.py:512x512',
          'video_depth_anything_vits_518': 'configs/video_depth_anything_vits_7scenes_relative.py:518x518'}
# model name -> backbone options that replace the config's for every runtime (see the module docstring)
BACKBONE_OPTIONS = {'depth_anything_v2_vits_518': {'pos_interp': 'bicubic'},
                    'video_depth_anything_vits_518': {'pos_interp': 'bicubic'}}
RUNTIMES = ('eager', 'compile', 'onnx', 'onnx_int8')


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('--models', nargs='+', default=list(MODELS), metavar='NAME[=CONFIG:HxW]',
                        help=f"models to measure (default: {' '.join(MODELS)})")
    parser.add_argument('--runtimes', nargs='+', default=list(RUNTIMES), choices=RUNTIMES,
                        help=f"runtimes to measure (default: {' '.join(RUNTIMES)})")
    parser.add_argument('--batches', nargs='+', type=int, default=[1, 8], help='batch sizes (default: 1 8)')
    parser.add_argument('--repeats', type=int, default=5, help='timed calls per measurement (default 5)')
    parser.add_argument('--timeout', type=float, default=900.0,
                        help='seconds one measurement may take, its process included (default 900)')
    parser.add_argument('--threads', type=int, default=os.cpu_count(), help='intra-op threads (default: all cores)')
    parser.add_argument('--work-dir', type=Path, default=Path('results/deploy_benchmark'),
                        help='where the ONNX files go (default results/deploy_benchmark)')
    parser.add_argument('--out', type=Path, default=None, help='also write the report as Markdown here')
    parser.add_argument('--child', nargs=3, metavar=('MODEL', 'RUNTIME', 'BATCH'), default=None,
                        help='(internal) run one measurement in this process and print it as JSON')
    return parser


def model_spec(spec: str) -> tuple[str, str, tuple[int, int]]:
    """'NAME' (from :data:`MODELS`) or 'NAME=CONFIG:HxW' -> (name, config path, (h, w))."""
    name, _, given = spec.partition('=')
    if not given and name not in MODELS:
        raise SystemExit(f"unknown model {name!r}: one of {', '.join(MODELS)}, or NAME=CONFIG:HxW")
    config, _, size = (given or MODELS[name]).rpartition(':')
    try:
        h, w = (int(v) for v in size.lower().split('x'))
    except ValueError:
        raise SystemExit(f"model {spec!r}: the size must be HxW, e.g. configs/x.py:512x512") from None
    return name, config, (h, w)


def build_model(name: str, config: str):
    import torch

    from heads.engine.launch import load_config
    from heads.export import exportable
    from heads.registry import MODELS as REGISTRY
    torch.manual_seed(0)
    cfg = load_config(str(ROOT / config) if not Path(config).is_absolute() else config, None, None, None)
    model = cfg.model.copy()
    model.pop('pretrained', None)
    backbone = model.get('backbone')
    if isinstance(backbone, dict):
        model['backbone'] = {k: v for k, v in backbone.items() if k != 'pretrained'}  # random init: no file read
        model['backbone'].update(BACKBONE_OPTIONS.get(name, {}))
    return exportable(REGISTRY.build(model))


def onnx_file(work_dir: Path, name: str, config: str, size: tuple[int, int], int8: bool) -> Path:
    """The model's ONNX file (exported once, traced at ``size``), or its dynamic int8 quantization."""
    fp32 = work_dir / f'{name}.onnx'
    if not fp32.exists():
        from heads.export import export_onnx
        export_onnx(build_model(name, config), fp32, example_size=size)
    if not int8:
        return fp32
    quantized = work_dir / f'{name}.int8.onnx'
    if not quantized.exists():
        from heads.export.quantize import quantize_dynamic
        quantize_dynamic(fp32, quantized)
    return quantized


def measure(args) -> dict:
    """One (model, runtime, batch) in this process: seconds per call, peak and starting RSS (MiB)."""
    import resource
    import statistics
    import time

    import numpy as np
    import torch
    spec, runtime, batch = args.child
    name, config, (h, w) = model_spec(spec)
    torch.set_num_threads(args.threads)
    if runtime == 'prepare':  # the ONNX files, in a process of their own (the export's memory is not a run's)
        args.work_dir.mkdir(parents=True, exist_ok=True)
        return {'onnx': str(onnx_file(args.work_dir, name, config, (h, w), int8=True))}
    x = torch.randn(int(batch), 3, h, w, generator=torch.Generator().manual_seed(0))
    if runtime.startswith('onnx'):
        from heads.export.onnx import onnx_session
        args.work_dir.mkdir(parents=True, exist_ok=True)
        session = onnx_session(onnx_file(args.work_dir, name, config, (h, w), runtime == 'onnx_int8'), args.threads)
        feed = {session.get_inputs()[0].name: np.ascontiguousarray(x.numpy())}
        call = lambda: session.run(None, feed)  # noqa: E731
    else:
        model = build_model(name, config)
        forward = torch.compile(model) if runtime == 'compile' else model

        def call():
            with torch.inference_mode():
                return forward(x)
    call()  # untimed: kernels loaded, compiled, caches warm
    start_rss = rss_mib()
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return {'seconds': seconds, 'img_s': int(batch) / seconds, 'start_rss_mib': start_rss,
            'peak_rss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 'rounds': times}


def run_child(args, spec: str, runtime: str, batch: int) -> dict:
    command = [sys.executable, __file__, '--child', spec, runtime, str(batch), '--repeats', str(args.repeats),
               '--threads', str(args.threads), '--work-dir', str(args.work_dir)]
    return child_result(command, timeout=args.timeout)


def report(args, argv=None) -> str:
    import torch

    from lab.records.rows import record_rows, tool_command
    command = ' '.join(['python tools/benchmark_deploy.py', *(sys.argv[1:] if argv is None else argv)])
    lines = [f'`{command}`', '', f'CPU {cpu_name()}, {os.cpu_count()} cores, {args.threads} intra-op thread(s), '
             f'torch {torch.__version__}; random initialisation; median of {args.repeats} calls', '',
             '| model | input | batch | runtime | s / call | img / s | peak RSS MiB | RSS before MiB |',
             '|---|---|---|---|---|---|---|---|']
    for spec in args.models:
        name, _, (h, w) = model_spec(spec)
        prepared = {}
        if any(r.startswith('onnx') for r in args.runtimes):
            prepared = run_child(args, spec, 'prepare', 1)
        for batch in args.batches:
            for runtime in args.runtimes:
                r = prepared if runtime.startswith('onnx') and 'error' in prepared else \
                    run_child(args, spec, runtime, batch)
                lines.append(table_row(f"| {name} | {h}x{w} | {batch} | {runtime} |", r))
                print(lines[-1], flush=True)
                if 'error' not in r:
                    record_rows('benchmark_deploy', [r], rounds={'ours': 'rounds'}, threads=args.threads,
                                fixed={'model': name, 'size': f'{h}x{w}', 'batch': batch, 'runtime': runtime},
                                command=tool_command(__file__, argv))
    return '\n'.join(lines) + '\n'


def table_row(lead: str, r: dict) -> str:
    """The cells after ``lead`` for one child's result: its error, or seconds per call to three significant digits (so
    that batch / seconds reproduces the img/s cell; 0.013 for 0.0127 s did not), img/s and resident memory."""
    if 'error' in r:
        return f"{lead} {r['error']} | | | |"
    return (f"{lead} {format_value(float(r['seconds']))} | {r['img_s']:.2f} | {r['peak_rss_mib']:.0f} "
            f"| {r['start_rss_mib']:.0f} |")


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)))
        return
    for spec in args.models:
        model_spec(spec)  # every name checked before the first measurement
    text = report(args, argv)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
