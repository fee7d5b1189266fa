r"""Tiled depth inference at any resolution: wall time and peak memory of one large image, tiled, against the single
pass at the sizes where it fits (each run in a fresh process, so its peak resident memory is its own).

    python tools/benchmark_tiling.py --out docs/benchmarks/tiled_depth_intel_xeon.md
    python tools/benchmark_tiling.py --size 4000 3000 --tile 518 518 --overlap 64 --single 686 518 1372 1036

The image: a real 7-Scenes frame (``--image``) upscaled to ``--size`` (W H). The model: Depth Anything V2
(``--encoder``, relative head) built from its config with random initialisation (seed 0): time and memory do not
depend on the weights, the depth map does (no depth figure is reported). Through heads.Predictor, as tools/infer.py
runs it: ``Predictor(cfg, tile=(H, W), overlap=N)(image)`` for the tiled pass, ``Predictor(cfg)(image)`` for the
single pass. Per run: seconds of the call (after one untimed call on a small image that loads the kernels), the
process's peak resident memory (``ru_maxrss``) and its resident memory before the call (model, image, libraries).
Each measured row is one record of series benchmark_tiling in the results store.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.benchmark.processes import child_result, cpu_name, rss_mib

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_IMAGE = ROOT.parent / 'shared' / 'data' / 'depth-7scenes' / 'rgb' / 'frame-000000.jpg'


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('--image', type=Path, default=DEFAULT_IMAGE, help='the real image to upscale (default: '
                        'a 7-Scenes frame)')
    parser.add_argument('--size', type=int, nargs=2, default=(4000, 3000), metavar=('W', 'H'),
                        help='the large image, width height (default: 4000 3000)')
    parser.add_argument('--tile', type=int, nargs=2, default=(518, 518), metavar=('H', 'W'),
                        help='tile height width (default: 518 518, the Depth Anything size)')
    parser.add_argument('--overlap', type=int, default=64, help='pixels shared by neighbouring tiles (default 64)')
    parser.add_argument('--encoder', default='vits', help='Depth Anything V2 encoder (default vits)')
    parser.add_argument('--single', type=int, nargs='*', default=(686, 518, 1372, 1036), metavar='W H',
                        help='sizes (pairs W H) for the single pass, also tiled at the same size for the gap '
                             '(default: 686 518 1372 1036)')
    parser.add_argument('--threads', type=int, default=1, help='torch intra-op threads (default 1)')
    parser.add_argument('--out', type=Path, default=None, help='also write the report as Markdown here')
    parser.add_argument('--child', choices=['tiled', 'single'], default=None,
                        help='(internal) run one measurement in this process and print it as JSON')
    parser.add_argument('--save', type=Path, default=None, help='(internal) with --child: save the map (.npy)')
    return parser


def measure(args) -> dict:
    """One pass (``args.child``) of the upscaled image in this process: seconds, peak and starting RSS (MiB)."""
    import resource
    import time

    import cv2
    import numpy as np
    import torch

    from heads import Predictor
    from heads.io.images import read_rgb
    from heads.models.depth_anything import depth_anything_v2_config
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tiled = args.child == 'tiled'
    predictor = Predictor(dict(model=depth_anything_v2_config(args.encoder)), tile=args.tile if tiled else None,
                          overlap=args.overlap)
    image = cv2.resize(read_rgb(args.image), tuple(args.size), interpolation=cv2.INTER_LINEAR)
    predictor(np.ascontiguousarray(image[:140, :140]))  # untimed: kernels loaded, caches warm
    start_rss = rss_mib()
    start = time.perf_counter()
    depth = predictor(image)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.save:
        np.save(args.save, depth)
    return {'seconds': seconds, 'peak_rss_mib': peak, 'start_rss_mib': start_rss, 'shape': list(depth.shape)}


def run_child(args, kind: str, size, save: Path | None = None) -> dict:
    command = [sys.executable, __file__, '--child', kind, '--image', str(args.image), '--size', *map(str, size),
               '--tile', *map(str, args.tile), '--overlap', str(args.overlap), '--encoder', args.encoder,
               '--threads', str(args.threads)]
    if save:
        command += ['--save', str(save)]
    return child_result(command)


def gap(tiled_path: Path, single_path: Path) -> float:
    """RMS of the tiled map (mapped onto the single pass by one least-squares scale and shift) minus the single
    pass, over the single pass's standard deviation."""
    import numpy as np
    import torch

    from heads.evaluation.metrics import fit_scale_shift
    t, s = (torch.from_numpy(np.load(p)).double().flatten() for p in (tiled_path, single_path))
    a, b = fit_scale_shift(t, s)
    return float((a * t + b - s).pow(2).mean().sqrt() / s.std())


def report(args, argv=None) -> str:
    import os
    import tempfile

    import torch
    pairs = list(args.single)
    if len(pairs) % 2:
        raise SystemExit(f'--single takes pairs W H, got {len(pairs)} numbers')
    sizes = [tuple(pairs[i:i + 2]) for i in range(0, len(pairs), 2)]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            single = run_child(args, 'single', size, Path(folder) / 'single.npy')
            tiled = run_child(args, 'tiled', size, Path(folder) / 'tiled.npy')
            ok = 'error' not in tiled and 'error' not in single
            g = gap(Path(folder) / 'tiled.npy', Path(folder) / 'single.npy') if ok else None
            rows += [('single', size, single, None), ('tiled', size, tiled, g)]
        rows.append(('tiled', tuple(args.size), run_child(args, 'tiled', args.size), None))
    cpu = cpu_name()
    command = ' '.join(['python tools/benchmark_tiling.py', *(sys.argv[1:] if argv is None else argv)])
    lines = [f'`{command}`', '',
             f'Depth Anything V2 {args.encoder} (relative, random initialisation), tiles {args.tile[0]}x{args.tile[1]} '
             f'overlap {args.overlap}; CPU {cpu}, {os.cpu_count()} cores, {args.threads} torch thread(s), torch '
             f'{torch.__version__}', '',
             '| pass | image (W x H) | megapixels | seconds | peak RSS MiB | RSS before MiB | gap to single |',
             '|---|---|---|---|---|---|---|']
    for kind, (w, h), result, g in rows:
        if 'error' in result:
            lines.append(f"| {kind} | {w} x {h} | {w * h / 1e6:.2f} | {result['error']} | | | |")
            continue
        record_row(args, argv, kind, (w, h), result, g)
        lines.append(f"| {kind} | {w} x {h} | {w * h / 1e6:.2f} | {result['seconds']:.1f} | "
                     f"{result['peak_rss_mib']:.0f} | {result['start_rss_mib']:.0f} | "
                     f"{'' if g is None else f'{g:.3f}'} |")
    return '\n'.join(lines) + '\n'


def record_row(args, argv, kind: str, size, result: dict, gap_to_single: float | None) -> None:
    """One record of series benchmark_tiling: the pass at ``size`` (W x H) with its tile settings (the single pass
    has none), its one timed call's seconds as the round, memory and the gap to the single pass as metrics."""
    from lab.records.rows import row_record, tool_command
    tiles = {'tile': '{}x{}'.format(*args.tile), 'overlap': args.overlap} if kind == 'tiled' else {}
    row = {**result, **({} if gap_to_single is None else {'gap_to_single': gap_to_single}),
           'megapixels': size[0] * size[1] / 1e6, 'rounds': [result['seconds']]}
    row_record('benchmark_tiling', row, fixed={'model': f'depth_anything_v2_{args.encoder}', 'pass': kind,
                                               'size': '{}x{}'.format(*size), **tiles},
               rounds={'ours': 'rounds'}, exclude=['shape'], threads=args.threads, command=tool_command(__file__, argv))


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)))
        return
    text = report(args, argv)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
