r"""int8 for the CPU: quantize an exported ONNX task model, and measure what it costs and what it gains.

    python tools/export_model.py --config configs/dpt_vitt4_camvid_cpu.py --checkpoint CKPT --out dpt.onnx
    python tools/quantize.py dpt.onnx --out dpt_int8.onnx                       # dynamic int8 Linears
    python tools/quantize.py dpt.onnx --out dpt_int8.onnx --config configs/dpt_vitt4_camvid_cpu.py \
        --data-root ../shared/data/camvid --checkpoint CKPT --benchmark 1 8 --json int8.json

--static N also quantizes the convolutions statically, their activation ranges calibrated on the first N images of
the config's training set (needs --config). With --config, the config's test set is evaluated with its own
evaluator for the checkpoint (PyTorch, if --checkpoint), the fp32 file and the int8 file, through the same
pre- and post-processing (heads.export.load_onnx_model: a dense model or a mask model). --benchmark B [B ...] times
onnxruntime fp32 and int8 in this process at those batch sizes (paired rounds, median), on the config's prediction
size or --size.

--out and --json must be new to the inputs: one that is MODEL, --config or --checkpoint (also through a link) is
refused before anything is written.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from lab.outputs import refuse_outputs_that_are_inputs

QUANTIZED_OP = 'Integer'  # MatMulInteger, ConvInteger


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('model', type=Path, help='an fp32 ONNX task model (tools/export_model.py --config)')
    parser.add_argument('--out', type=Path, required=True, help='the int8 ONNX file to write')
    parser.add_argument('--per-channel', action='store_true', help='one int8 weight scale per output channel')
    parser.add_argument('--static', type=int, metavar='N', default=0,
                        help='also quantize the convolutions statically, calibrated on N training images')
    parser.add_argument('--config', help='evaluate on this config\'s test set (and calibrate on its training set)')
    parser.add_argument('--data-root', help="override the config's data roots")
    parser.add_argument('--checkpoint', help='also evaluate this checkpoint in PyTorch (with --config)')
    parser.add_argument('--limit', type=int, help='evaluate the first N test images only')
    parser.add_argument('--benchmark', type=int, nargs='+', metavar='B', default=[],
                        help='time onnxruntime fp32 and int8 at these batch sizes')
    parser.add_argument('--size', type=int, nargs=2, metavar=('H', 'W'),
                        help='benchmark input size (default: the config\'s prediction size, padded)')
    parser.add_argument('--rounds', type=int, default=5, help='benchmark rounds (each times fp32 then int8)')
    parser.add_argument('--threads', type=int, default=None, help="onnxruntime's intra-op threads")
    parser.add_argument('--json', type=Path, help='also write the results here')
    return parser


def calibration_batches(cfg, count: int, meta: dict):
    """The first ``count`` training images, through the test pipeline and the file's preprocessing (its metadata),
    those of the first image's size."""
    import copy
    import math

    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner

    from heads.models.preprocessor import DensePreprocessor
    init_default_scope('heads')
    loader_cfg = copy.deepcopy(dict(cfg.test_dataloader))
    loader_cfg['dataset'] = {**cfg.train_dataloader.dataset, 'pipeline': cfg.test_dataloader.dataset.pipeline}
    loader_cfg.update(num_workers=0, persistent_workers=False, batch_size=1, sampler=dict(type='DefaultSampler',
                                                                                          shuffle=False))
    pre = meta['preprocessor']
    pre = DensePreprocessor(**{**pre, 'size_divisor': math.lcm(pre['size_divisor'], meta['input_multiple'])})
    batches = []
    for data in Runner.build_dataloader(loader_cfg):
        if len(batches) >= count:
            break
        batches.append(pre(data, False)['inputs'].numpy())
    return [b for b in batches if b.shape[-2:] == batches[0].shape[-2:]]


def timings(files: dict, batch: int, size, rounds: int, threads) -> dict:
    """{name: median seconds per batch} of onnxruntime sessions on the files, timed in alternating rounds."""
    import numpy as np

    from heads.export import onnx_session
    sessions = {name: onnx_session(path, threads) for name, path in files.items()}
    x = np.random.default_rng(0).standard_normal((batch, 3, *size)).astype(np.float32)
    times = {name: [] for name in files}
    for session in sessions.values():  # warm-up
        session.run(None, {session.get_inputs()[0].name: x})
    for _ in range(rounds):
        for name, session in sessions.items():
            start = time.perf_counter()
            session.run(None, {session.get_inputs()[0].name: x})
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def cpu_name() -> str:
    """The CPU's model name and its int8 instruction sets (from /proc/cpuinfo where there is one)."""
    try:
        info = Path('/proc/cpuinfo').read_text()
    except OSError:
        return platform.processor() or 'unknown CPU'
    name = next((line.split(':', 1)[1].strip() for line in info.splitlines() if line.startswith('model name')), '?')
    flags = next((line.split(':', 1)[1].split() for line in info.splitlines() if line.startswith('flags')), [])
    extras = [f for f in ('avx512_vnni', 'avx_vnni', 'amx_int8') if f in flags]
    import os
    return f"{name}, {os.cpu_count()} cores" + (f" ({', '.join(extras)})" if extras else '')


def main(argv=None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.static or args.checkpoint or args.limit) and not args.config:
        parser.error('--static, --checkpoint and --limit need --config')
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out, '--json': args.json},
                                   {'MODEL': args.model, '--config': args.config, '--checkpoint': args.checkpoint})
    from heads.export import load_onnx_model, read_metadata
    from heads.export.quantize import op_counts, quantize_dynamic, quantize_static
    meta = read_metadata(args.model)
    cfg = None
    if args.config:
        from heads.engine.launch import load_config
        cfg = load_config(args.config, data_root=args.data_root)
    start = time.perf_counter()
    if args.static:
        quantize_static(args.model, args.out, calibration_batches(cfg, args.static, meta))
    else:
        quantize_dynamic(args.model, args.out, per_channel=args.per_channel)
    ops = op_counts(args.out)
    print(f"wrote {args.out} in {time.perf_counter() - start:.1f} s: "
          f"{read_metadata(args.out)['quantization']['kind']}; "
          f"{', '.join(f'{n} {op}' for op, n in sorted(ops.items()) if QUANTIZED_OP in op or 'Quantize' in op)}",
          flush=True)
    results = {'cpu': cpu_name(), 'fp32': str(args.model), 'int8': str(args.out),
               'quantization': read_metadata(args.out)['quantization'], 'metrics': {}, 'seconds_per_batch': {}}
    files = {'onnxruntime fp32': args.model, 'onnxruntime int8': args.out}
    if cfg is not None:
        from heads.export.evaluate import evaluate
        models = {}
        if args.checkpoint:
            from heads import Predictor
            models['pytorch fp32'] = Predictor(cfg, args.checkpoint).model
        models.update({name: load_onnx_model(path, args.threads) for name, path in files.items()})
        for name, model in models.items():
            start = time.perf_counter()
            metrics = evaluate(model, cfg, args.limit)
            results['metrics'][name] = metrics
            print(f"{name}: {json.dumps(metrics)} ({time.perf_counter() - start:.0f} s)", flush=True)
    if args.benchmark:
        size = tuple(args.size) if args.size else benchmark_size(meta)
        for batch in args.benchmark:
            seconds = timings(files, batch, size, args.rounds, args.threads)
            results['seconds_per_batch'][f'batch {batch} {size[0]}x{size[1]}'] = seconds
            fp32, int8 = seconds['onnxruntime fp32'], seconds['onnxruntime int8']
            print(f"batch {batch}, {size[0]}x{size[1]}: fp32 {fp32 * 1e3:.1f} ms, int8 {int8 * 1e3:.1f} ms "
                  f"({fp32 / int8:.2f}x)", flush=True)
    print(f"CPU: {results['cpu']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + '\n')
    return results


def benchmark_size(meta: dict) -> tuple[int, int]:
    """The padded input size of an image at the file's ``predict_scale`` (a 4:3 image), else 512x512."""
    import math
    scale = meta.get('predict_scale')
    multiple = math.lcm(meta['preprocessor']['size_divisor'], meta['input_multiple'])
    if not scale:
        return 512, 512
    w, h = max(scale), min(scale)  # a landscape image fitted into the scale
    return -(-h // multiple) * multiple, -(-w // multiple) * multiple


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
