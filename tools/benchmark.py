"""Throughput and peak memory of zoo models and whole DPT models; against timm / transformers where they have
the model, in the same process.

Backbones (as classifiers) vs timm, or transformers for CvT; same weights (ours loads the reference's state dict):
    python tools/benchmark.py                                   # ViT-B/16 and DeiT-S, batch 8, 224, fp32 + bf16
    python tools/benchmark.py --models cvt_13_224 coatnet_0_rw_224 --dtypes fp32 --out results/bench.md
DPT ViT-B/16 segmentation vs transformers' DPTForSemanticSegmentation (forward, training, checkpointing):
    python tools/benchmark.py --dpt --checkpointing
Whole dense models from configs (default: the ViT-B ADE20K config at its 512x512 crop), each model's achieved
GFLOP/s next to this machine's matmul rate (2048^3 F.linear products timed in the same rounds):
    python tools/benchmark.py --dense configs/dpt_vitb_ade20k.py configs/dpt_cvt13_ade20k.py --dtypes fp32 bf16
    python tools/benchmark.py --dense --backbones deit_small_patch16_224 --batch 1 4 --layouts channels_last \
        contiguous --checkpointing --train [--compile]
Resolution sweep of the DPT ViT-B model, batch 1, SDPA vs explicit attention (table + PNG):
    python tools/benchmark.py --sweep 224 384 512 768 1024 --out docs/sweep.md
On one GPU (under 5 minutes): DPT ViT-B/16 512x512, batch 8, bf16 training and inference img/s, peak memory:
    python tools/benchmark.py --dense --device cuda --dtypes bf16 --batch 8 --train

Reference comparisons interleave the runs (ours, reference, reference, ours, ...) so that drift on a busy
machine hits both alike; the ratio is the median over rounds of reference time / our time (> 1: ours faster).
Peak memory: CUDA's allocator peak, or on CPU the peak of live tensor bytes created by the pass.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from functools import partial
from pathlib import Path

import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'tools'))
import dense_benchmark  # noqa: E402
import zoo  # noqa: E402
from zoo.core import set_grad_checkpointing  # noqa: E402
from zoo.profiling import (count_macs, count_params, interleaved_rounds, median, peak_memory, seconds_of,  # noqa: E402
                            time_forward)

DTYPES = dense_benchmark.DTYPES


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


def interleaved_times(models: list, x: torch.Tensor, amp_dtype, warmup: int, iters: int) -> list[list[float]]:
    """Forward seconds of each model per round, after ``warmup`` untimed passes each."""
    for model in models:
        time_forward(model, x, amp_dtype=amp_dtype, warmup=warmup, iters=1)
    return interleaved_rounds([partial(time_forward, m, x, amp_dtype=amp_dtype, warmup=0, iters=1) for m in models],
                              iters)


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
            times = interleaved_rounds([partial(seconds_of, call, x.device) for call in calls], rounds)
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
        set_grad_checkpointing(ours.backbone)
        with peak_memory(x.device) as mem:
            seconds = seconds_of(lambda: train_step(ours, x, False), x.device)
        rows.append({'pass': 'forward+backward, activation checkpointing', 'batch': batch, 'size': size,
                     'ours_s': seconds, 'ours_peak_MiB': mem['peak_mib'], 'memory_ratio': mem['peak_mib'] / peaks[1]})
        print(format_row(rows[-1], DPT_COLUMNS), flush=True)
    return rows


DPT_COLUMNS = ['pass', 'batch', 'size', 'ours_s', 'hf_s', 'time_ratio', 'ours_peak_MiB', 'hf_peak_MiB',
               'memory_ratio']


COLUMNS = ['model', 'dtype', 'batch', 'size', 'params_M', 'GMACs', 'ours_img_s', 'ref_img_s', 'ratio',
           'ours_peak_MiB', 'ref_peak_MiB']


def format_value(value) -> str:
    """Floats with two decimals, or three significant digits below 1 (0.0412 img/s, not 0.04)."""
    if not isinstance(value, float):
        return str(value)
    return f"{value:.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"


def format_row(row: dict, columns=None) -> str:
    cells = [format_value(row.get(c, '-')) for c in columns or COLUMNS]
    return '| ' + ' | '.join(cells) + ' |'


def markdown(rows: list[dict], header: str, columns=None) -> str:
    columns = columns or COLUMNS
    lines = [header, '', '| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    return '\n'.join(lines + [format_row(r, columns) for r in rows]) + '\n'


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--models', nargs='+', default=['vit_base_patch16_224', 'deit_small_patch16_224'])
    parser.add_argument('--batch', type=int, nargs='+', default=None,
                        help='batch size(s) (default: 8 for backbones, 1 for --dpt and --dense)')
    parser.add_argument('--size', type=int, default=None,
                        help="square input size (default: 224 for backbones, 512 for --dpt, the config's crop "
                             "for --dense)")
    parser.add_argument('--dtypes', nargs='+', choices=sorted(DTYPES), default=None,
                        help='fp32 and/or bf16 autocast (default: both; fp32 for --dense and --sweep)')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--warmup', type=int, default=None, help='untimed passes (default 2; 1 for --dense)')
    parser.add_argument('--iters', type=int, default=None,
                        help='timed rounds, median reported (default 5; 3 for --dpt, --dense and --sweep)')
    parser.add_argument('--threads', type=int, default=None, help='torch intra-op threads (default: torch decides)')
    parser.add_argument('--out', type=Path, default=None, help='also write the table as Markdown here')
    parser.add_argument('--dpt', action='store_true',
                        help="DPT ViT-B/16 segmentation vs transformers' DPTForSemanticSegmentation: forward, "
                             "forward+backward and peak memory")
    parser.add_argument('--checkpointing', action='store_true',
                        help='with --dpt or --dense: also train with activation checkpointing')
    parser.add_argument('--dense', nargs='*', metavar='CONFIG', default=None,
                        help='whole models of these configs (default configs/dpt_vitb_ade20k.py)')
    parser.add_argument('--backbones', nargs='+', default=None,
                        help='with --dense: the first config with each of these backbones (NAME or NAME:{...})')
    parser.add_argument('--layouts', nargs='+', choices=['channels_last', 'contiguous'], default=['channels_last'],
                        help='with --dense: neck/head convolution weight layouts')
    parser.add_argument('--train', action='store_true', help='with --dense: also time forward + backward')
    parser.add_argument('--compile', action='store_true', help='with --dense: torch.compile the model first')
    parser.add_argument('--sweep', type=int, nargs='+', metavar='SIZE', default=None,
                        help="inference of the (first --dense, default ViT-B) config's model at these square sizes, "
                             "SDPA vs explicit attention; writes a PNG beside --out")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.sweep:
        return main_sweep(args)
    if args.dense is not None:
        return main_dense(args)
    if args.dpt:
        return main_dpt(args)
    unknown = [m for m in args.models if m not in zoo.list_backbones()]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; see zoo.list_backbones()")
    batch, size = (args.batch or [8])[0], args.size or 224
    header = (f"Forward pass, batch {batch}, {size}x{size}, device {args.device}, "
              f"{torch.get_num_threads()} threads, torch {torch.__version__}; ratio = reference time / ours")
    print(header)
    print('| ' + ' | '.join(COLUMNS) + ' |')
    rows = [r for name in tqdm(args.models, desc='models', unit='model')
            for r in benchmark(name, batch, size, args.dtypes or ['fp32', 'bf16'],
                               args.device, default(args.warmup, 2), default(args.iters, 5))]
    write(args.out, markdown(rows, header))
    return rows


def default(value, fallback):
    return fallback if value is None else value


def write(out: Path | None, text: str) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")


def main_dpt(args) -> list[dict]:
    size, batch, rounds = args.size or 512, (args.batch or [1])[0], default(args.iters, 3)
    header = (f"DPT ViT-B/16 segmentation (150 classes) vs transformers, {size}x{size}, batch {batch}, "
              f"device {args.device}, {torch.get_num_threads()} threads; ratios = ours / HF (< 1: ours better)")
    print(header)
    print('| ' + ' | '.join(DPT_COLUMNS) + ' |')
    rows = benchmark_dpt(batch, size, rounds, args.device, args.checkpointing)
    write(args.out, markdown(rows, header, DPT_COLUMNS))
    return rows


def dense_configs(args) -> dict:
    """name -> config: each --dense config, or the first with each of --backbones."""
    from compare import backbone_configs
    from heads.engine.launch import load_config
    paths = args.dense or [str(ROOT / 'configs' / 'dpt_vitb_ade20k.py')]
    if args.backbones:
        return backbone_configs(load_config(paths[0]), args.backbones)
    return {Path(p).stem: load_config(p) for p in paths}


def main_dense(args) -> list[dict]:
    from compare import crop_size
    torch.backends.cudnn.benchmark = True  # GPU: pick the fastest convolution algorithms for these fixed shapes
    configs = dense_configs(args)
    sizes = {name: (args.size, args.size) if args.size else crop_size(cfg) for name, cfg in configs.items()}
    header = (f"Whole models, device {args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
              f"GFLOP_s = 2 x MACs / forward time; matmul_GFLOP_s = this machine's rate on 2048^3 F.linear products in "
              f"the same dtype, timed in rounds alternating with the forward; matmul_pct = median over rounds of "
              f"the model's rate / the matmul rate")
    print(header)
    print('| ' + ' | '.join(DENSE_COLUMNS) + ' |')
    rows = dense_benchmark.benchmark_models(
        configs, sizes=sizes, batches=args.batch or [1], dtypes=args.dtypes or ['fp32'], layouts=args.layouts,
        checkpointing=[False, True] if args.checkpointing else [False], compile=args.compile, train=args.train,
        device=args.device, iters=default(args.iters, 3), warmup=default(args.warmup, 1),
        report=lambda row: print(format_row(row, DENSE_COLUMNS), flush=True))
    write(args.out, markdown(rows, header, DENSE_COLUMNS))
    return rows


def main_sweep(args) -> list[dict]:
    name, cfg = next(iter(dense_configs(args).items()))
    dtype = (args.dtypes or ['fp32'])[0]
    header = (f"{name}: batch-1 inference against input size, SDPA vs explicit attention, {dtype}, device "
              f"{args.device}, {torch.get_num_threads()} threads")
    print(header)
    print('| ' + ' | '.join(SWEEP_COLUMNS) + ' |')
    rows = dense_benchmark.resolution_sweep(cfg, args.sweep, device=args.device, dtype=dtype,
                                            iters=default(args.iters, 3),
                                            report=lambda row: print(format_row(row, SWEEP_COLUMNS), flush=True))
    write(args.out, markdown(rows, header, SWEEP_COLUMNS))
    if args.out:
        dense_benchmark.plot_sweep(rows, args.out.with_suffix('.png'))
        print(f"wrote {args.out.with_suffix('.png')}")
    return rows


DENSE_COLUMNS = ['model', 'dtype', 'layout', 'ckpt', 'compile', 'batch', 'size', 'params_M', 'GMACs', 'fwd_img_s',
                 'GFLOP_s', 'matmul_GFLOP_s', 'matmul_pct', 'fwd_peak_MiB', 'train_img_s', 'train_peak_MiB']
SWEEP_COLUMNS = ['size', 'tokens', 'attention', 'dtype', 'seconds', 'peak_MiB', 'backbone_peak_MiB']


if __name__ == '__main__':
    main()
