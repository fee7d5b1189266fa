"""Forward throughput and peak memory of zoo models against their reference implementation, in one process.

    python tools/benchmark.py                                   # ViT-B/16 and DeiT-S, batch 8, 224, fp32 + bf16
    python tools/benchmark.py --models vit_small_patch16_224 --batch 4 --dtypes fp32 --out results/bench.md

Both models carry the same weights (ours loads the reference's state dict). Runs are interleaved (ours, reference,
reference, ours, ...) so that drift on a busy machine and the order hit both alike; the ratio
is the median over rounds of reference time / our time in that round (> 1: ours is faster).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import zoo  # noqa: E402
from zoo.profiling import count_macs, count_params, peak_memory, time_forward  # noqa: E402

DTYPES = {'fp32': None, 'bf16': torch.bfloat16}


def reference_model(name: str):
    """The timm model of the same name (random init), or None when timm lacks it or is not installed."""
    try:
        import timm
    except ImportError:
        return None
    return timm.create_model(name, pretrained=False) if name in timm.list_models() else None


def interleaved_times(models: list, x: torch.Tensor, amp_dtype, warmup: int, iters: int) -> list[list[float]]:
    """Seconds per forward of each model in each round; the order alternates between rounds (AB BA ...)
    so that neither model always runs first after the other."""
    for model in models:
        time_forward(model, x, amp_dtype=amp_dtype, warmup=warmup, iters=1)
    times = [[] for _ in models]
    for r in range(iters):
        order = range(len(models)) if r % 2 == 0 else reversed(range(len(models)))
        for i in order:
            times[i].append(time_forward(models[i], x, amp_dtype=amp_dtype, warmup=0, iters=1))
    return times


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure_peak(model, x, amp_dtype) -> float:
    autocast = torch.autocast(x.device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
    with torch.inference_mode(), autocast, peak_memory(x.device) as mem:
        model(x)
    return mem['peak_mib']


def benchmark(name: str, batch: int, size: int, dtypes: list[str], device: str, warmup: int, iters: int) -> list[dict]:
    ours = zoo.create_classifier(name).eval().to(device)
    ref = reference_model(name)
    if ref is not None:
        zoo.load_pretrained(ours, ref.state_dict())
        ref = ref.eval().to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    gmacs = count_macs(ours, x[:1]) / 1e9
    rows = []
    for dtype in dtypes:
        models = [ours] + ([ref] if ref is not None else [])
        times = interleaved_times(models, x, DTYPES[dtype], warmup, iters)
        row = {'model': name, 'dtype': dtype, 'batch': batch, 'size': size, 'params_M': count_params(ours) / 1e6,
               'GMACs': gmacs, 'ours_img_s': batch / median(times[0]),
               'ours_peak_MiB': measure_peak(ours, x, DTYPES[dtype])}
        if ref is not None:  # ratio: median over rounds of the paired ratio, so that slow spells cancel
            row.update(ref_img_s=batch / median(times[1]),
                       ratio=median([r / o for o, r in zip(times[0], times[1])]),
                       ref_peak_MiB=measure_peak(ref, x, DTYPES[dtype]))
        rows.append(row)
        print(format_row(row), flush=True)
    return rows


COLUMNS = ['model', 'dtype', 'batch', 'size', 'params_M', 'GMACs', 'ours_img_s', 'ref_img_s', 'ratio',
           'ours_peak_MiB', 'ref_peak_MiB']


def format_row(row: dict) -> str:
    cells = [f"{row[c]:.2f}" if isinstance(row.get(c), float) else str(row.get(c, '-')) for c in COLUMNS]
    return '| ' + ' | '.join(cells) + ' |'


def markdown(rows: list[dict], header: str) -> str:
    lines = [header, '', '| ' + ' | '.join(COLUMNS) + ' |', '|' + '---|' * len(COLUMNS)]
    return '\n'.join(lines + [format_row(r) for r in rows]) + '\n'


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--models', nargs='+', default=['vit_base_patch16_224', 'deit_small_patch16_224'])
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--dtypes', nargs='+', choices=sorted(DTYPES), default=['fp32', 'bf16'])
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--iters', type=int, default=5, help='timed rounds (median reported)')
    parser.add_argument('--threads', type=int, default=None, help='torch intra-op threads (default: torch decides)')
    parser.add_argument('--out', type=Path, default=None, help='also write the table as Markdown here')
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in zoo.list_backbones()]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; see zoo.list_backbones()")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    header = (f"Forward pass, batch {args.batch}, {args.size}x{args.size}, device {args.device}, "
              f"{torch.get_num_threads()} threads, torch {torch.__version__}; ratio = reference time / ours")
    print(header)
    print('| ' + ' | '.join(COLUMNS) + ' |')
    rows = [r for name in args.models for r in benchmark(name, args.batch, args.size, args.dtypes, args.device,
                                                           args.warmup, args.iters)]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(markdown(rows, header))
        print(f"wrote {args.out}")
    return rows


if __name__ == '__main__':
    main()
