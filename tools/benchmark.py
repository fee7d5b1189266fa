"""Forward throughput and peak memory of zoo models against their reference implementation, in one process.

    python tools/benchmark.py                                   # ViT-B/16 and DeiT-S, batch 8, 224, fp32 + bf16
    python tools/benchmark.py --models vit_small_patch16_224 --batch 4 --dtypes fp32 --out results/bench.md
    python tools/benchmark.py --dpt --checkpointing                # DPT ViT-B/16 512x512 vs transformers
    python tools/benchmark.py --models cvt_13_224 --dtypes fp32    # CvT-13 vs transformers' CvtForImageClassification

Both models carry the same weights (ours loads the reference's state dict). Runs are interleaved (ours, reference,
reference, ours, ...) so that drift on a busy machine and the order hit both alike; the ratio
is the median over rounds of reference time / our time in that round (> 1: ours is faster).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import zoo  # noqa: E402
from zoo.profiling import count_macs, count_params, peak_memory, time_forward  # noqa: E402

DTYPES = {'fp32': None, 'bf16': torch.bfloat16}


def hf_cvt_reference(name: str):
    """transformers' CvtForImageClassification with the sizes of our ``name`` (random init), or None."""
    try:
        import transformers
    except ImportError:
        return None
    from zoo.registry import get_variant
    kwargs = get_variant(name).kwargs
    config = transformers.CvtConfig(embed_dim=list(kwargs['embed_dims']), num_heads=list(kwargs['num_heads']),
                                    depth=list(kwargs['depths']), num_labels=1000)
    return transformers.CvtForImageClassification(config)


def reference_model(name: str):
    """The reference of ``name`` (random init): transformers for CvT, else the timm model of the same name;
    None when the reference library lacks it or is not installed."""
    if name.startswith('cvt_'):
        return hf_cvt_reference(name)
    try:
        import timm
    except ImportError:
        return None
    return timm.create_model(name, pretrained=False) if name in timm.list_models() else None


def interleaved_rounds(measures: list, rounds: int) -> list[list[float]]:
    """Seconds of each zero-argument ``measure`` (it returns its own duration) in each round; the order
    alternates between rounds (AB BA ...) so that neither always runs first after the other."""
    times = [[] for _ in measures]
    for r in range(rounds):
        for i in (range(len(measures)) if r % 2 == 0 else reversed(range(len(measures)))):
            times[i].append(measures[i]())
    return times


def interleaved_times(models: list, x: torch.Tensor, amp_dtype, warmup: int, iters: int) -> list[list[float]]:
    """Forward seconds of each model per round, after ``warmup`` untimed passes each."""
    for model in models:
        time_forward(model, x, amp_dtype=amp_dtype, warmup=warmup, iters=1)
    return interleaved_rounds([partial(time_forward, m, x, amp_dtype=amp_dtype, warmup=0, iters=1) for m in models],
                              iters)


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


def hf_dpt_pair(size: int, num_classes: int, workdir: Path):
    """transformers' DPTForSemanticSegmentation (ViT-B/16, mmseg/HF defaults) and ours with its weights."""
    import transformers
    import heads
    config = transformers.DPTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                    intermediate_size=3072, image_size=size, patch_size=16,
                                    backbone_out_indices=[2, 5, 8, 11], neck_hidden_sizes=[96, 192, 384, 768],
                                    fusion_hidden_size=256, num_labels=num_classes, readout_type='project')
    ref = transformers.DPTForSemanticSegmentation(config)
    ref.save_pretrained(workdir)
    return heads.from_pretrained_hf(workdir), ref


def train_step(model, x, is_ref: bool) -> None:
    """Forward + backward of the segmentation logits (dropout active, as in training)."""
    model.train()
    logits = model(pixel_values=x).logits if is_ref else model(x, mode='tensor')
    logits.float().mean().backward()
    model.zero_grad(set_to_none=True)


def time_call(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def benchmark_dpt(batch: int, size: int, rounds: int, device: str, checkpointing: bool) -> list[dict]:
    import tempfile
    with tempfile.TemporaryDirectory() as workdir:
        ours, ref = hf_dpt_pair(size, 150, Path(workdir))
    ours, ref = ours.to(device), ref.to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    infer = [lambda: ours.eval()(x, mode='tensor'), lambda: ref.eval()(pixel_values=x)]
    train = [lambda: train_step(ours, x, False), lambda: train_step(ref, x, True)]
    rows = []
    for label, calls, grad in (('forward', infer, False), ('forward+backward', train, True)):
        with torch.set_grad_enabled(grad):
            for call in calls:  # warm-up
                call()
            times = interleaved_rounds([partial(time_call, call) for call in calls], rounds)
            peaks = []
            for call in calls:
                with peak_memory(x.device) as mem:
                    call()
                peaks.append(mem['peak_mib'])
        rows.append({'pass': label, 'batch': batch, 'size': size, 'ours_s': median(times[0]),
                     'hf_s': median(times[1]), 'time_ratio': median([o / r for o, r in zip(*times)]),
                     'ours_peak_MiB': peaks[0], 'hf_peak_MiB': peaks[1], 'memory_ratio': peaks[0] / peaks[1]})
        print(format_row(rows[-1], DPT_COLUMNS), flush=True)
    if checkpointing:
        ours.backbone.grad_checkpointing = True
        with peak_memory(x.device) as mem:
            seconds = time_call(lambda: train_step(ours, x, False))
        rows.append({'pass': 'forward+backward, activation checkpointing', 'batch': batch, 'size': size,
                     'ours_s': seconds, 'ours_peak_MiB': mem['peak_mib'], 'memory_ratio': mem['peak_mib'] / peaks[1]})
        print(format_row(rows[-1], DPT_COLUMNS), flush=True)
    return rows


DPT_COLUMNS = ['pass', 'batch', 'size', 'ours_s', 'hf_s', 'time_ratio', 'ours_peak_MiB', 'hf_peak_MiB',
               'memory_ratio']


COLUMNS = ['model', 'dtype', 'batch', 'size', 'params_M', 'GMACs', 'ours_img_s', 'ref_img_s', 'ratio',
           'ours_peak_MiB', 'ref_peak_MiB']


def format_row(row: dict, columns=None) -> str:
    cells = [f"{row[c]:.2f}" if isinstance(row.get(c), float) else str(row.get(c, '-')) for c in columns or COLUMNS]
    return '| ' + ' | '.join(cells) + ' |'


def markdown(rows: list[dict], header: str, columns=None) -> str:
    columns = columns or COLUMNS
    lines = [header, '', '| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    return '\n'.join(lines + [format_row(r, columns) for r in rows]) + '\n'


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
    parser.add_argument('--dpt', action='store_true',
                        help="DPT ViT-B/16 segmentation vs transformers' DPTForSemanticSegmentation: forward, "
                             "forward+backward and peak memory (default size 512, batch 1, 3 rounds)")
    parser.add_argument('--checkpointing', action='store_true', help='with --dpt: also train with activation '
                                                                     'checkpointing')
    args = parser.parse_args(argv)
    if args.dpt:
        return main_dpt(args)
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


def main_dpt(args) -> list[dict]:
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    size = args.size if args.size != 224 else 512
    batch = args.batch if args.batch != 8 else 1
    rounds = args.iters if args.iters != 5 else 3
    header = (f"DPT ViT-B/16 segmentation (150 classes) vs transformers, {size}x{size}, batch {batch}, "
              f"device {args.device}, {torch.get_num_threads()} threads; ratios = ours / HF (< 1: ours better)")
    print(header)
    print('| ' + ' | '.join(DPT_COLUMNS) + ' |')
    rows = benchmark_dpt(batch, size, rounds, args.device, args.checkpointing)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(markdown(rows, header, DPT_COLUMNS))
        print(f"wrote {args.out}")
    return rows


if __name__ == '__main__':
    main()
