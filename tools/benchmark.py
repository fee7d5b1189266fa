r"""Throughput and peak memory of zoo models and whole DPT models; against timm / transformers where they have
the model, in the same process.

Backbones (as classifiers) vs timm, or transformers for CvT; same weights (ours loads the reference's state dict):
    python tools/benchmark.py                                   # ViT-B/16 and DeiT-S, batch 8, 224, fp32 + bf16
    python tools/benchmark.py --models cvt_13_224 coatnet_0_rw_224 --dtypes fp32 --out results/bench.md
DPT ViT-B/16 segmentation vs transformers' DPTForSemanticSegmentation (forward, training, checkpointing):
    python tools/benchmark.py --dpt --checkpointing
Whole dense models from configs (default: the ViT-B ADE20K config at its 512x512 crop), each model's achieved
GFLOP/s next to this machine's matmul rate (2048^3 products through the models' Linear kernel, timed in the same
rounds):
    python tools/benchmark.py --dense configs/dpt_vitb_ade20k.py configs/dpt_cvt13_ade20k.py --dtypes fp32 bf16
    python tools/benchmark.py --dense --backbones deit_small_patch16_224 --batch 1 4 --layouts channels_last \
        contiguous --checkpointing --train [--compile]
Resolution sweep of the DPT ViT-B model, batch 1, SDPA vs explicit attention (table + PNG):
    python tools/benchmark.py --sweep 224 384 512 768 1024 --out docs/sweep.md
Depth Anything V2 ViT-S vs transformers' DepthAnythingForDepthEstimation (forward, 518x518, peak memory):
    python tools/benchmark.py --depth-anything vits --dtypes fp32
Video Depth Anything ViT-S vs the authors' code (a clone of DepthAnything/Video-Depth-Anything), one 8-frame clip:
    python tools/benchmark.py --video-depth-anything vits ../Video-Depth-Anything --batch 8 --size 280
On one GPU (under 5 minutes): DPT ViT-B/16 512x512, batch 8, bf16 training and inference img/s, peak memory:
    python tools/benchmark.py --dense --device cuda --dtypes bf16 --batch 8 --train

Reference comparisons interleave the runs (ours, reference, reference, ours, ...) so that drift on a busy
machine hits both alike; the ratio is the median over rounds of reference time / our time (> 1: ours faster).
Peak memory: CUDA's allocator peak, or on CPU the peak of live tensor bytes created by the pass.
Records: series benchmark.reference (default mode), benchmark.dpt, benchmark.depth_anything,
benchmark.video_depth_anything, benchmark.dense and benchmark.sweep; each row one record with every timed round's
seconds.
"""
from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DTYPE_NAMES = ['bf16', 'fp32']


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('--models', nargs='+', default=['vit_base_patch16_224', 'deit_small_patch16_224'],
                        metavar='NAME', help='zoo classifiers to time against their references (default: %(default)s)')
    parser.add_argument('--batch', type=int, nargs='+', default=None,
                        help='batch size(s) (default: 8 for backbones, 1 for --dpt and --dense)')
    parser.add_argument('--size', type=int, default=None,
                        help="square input size (default: each backbone's own input size, timm's default for "
                             "the name (224 for most; 384 for vit_pe_core_tiny_patch16_384); 512 for --dpt, the "
                             "config's crop for --dense)")
    parser.add_argument('--dtypes', nargs='+', choices=DTYPE_NAMES, default=None,
                        help='fp32 and/or bf16 autocast (default: both; fp32 for --dense and --sweep)')
    parser.add_argument('--device', default='cpu', help="'cpu' (default), 'cuda' or 'cuda:N'")
    parser.add_argument('--warmup', type=int, default=None, help='untimed passes (default 2; 1 for --dense)')
    parser.add_argument('--iters', type=int, default=None,
                        help='timed rounds, median reported (default 5; 3 for --dpt, --dense and --sweep)')
    parser.add_argument('--threads', type=int, default=None, help='torch intra-op threads (default: torch decides)')
    parser.add_argument('--out', type=Path, default=None, help='also write the table as Markdown here')
    parser.add_argument('--dpt', action='store_true',
                        help="DPT ViT-B/16 segmentation vs transformers' DPTForSemanticSegmentation: forward, "
                             "training step (forward, backward, fused AdamW) and peak memory")
    parser.add_argument('--checkpointing', action='store_true',
                        help='with --dpt or --dense: also train with activation checkpointing')
    parser.add_argument('--dense', nargs='*', metavar='CONFIG', default=None,
                        help='whole models of these configs (default configs/dpt_vitb_ade20k.py)')
    parser.add_argument('--backbones', nargs='+', default=None, metavar='NAME',
                        help='with --dense: the first config with each of these backbones (NAME or NAME:{...})')
    parser.add_argument('--layouts', nargs='+', choices=['channels_last', 'contiguous'], default=['channels_last'],
                        help='with --dense: neck/head convolution weight layouts')
    parser.add_argument('--train', action='store_true',
                        help='with --dense: also time a training step (forward, backward, fused AdamW)')
    parser.add_argument('--compile', action='store_true', help='with --dense: torch.compile the model first')
    parser.add_argument('--depth-anything', choices=['vits', 'vitb', 'vitl'], default=None, metavar='ENCODER',
                        help="Depth Anything V2 (vits, vitb or vitl) forward vs transformers' "
                             "DepthAnythingForDepthEstimation, 518x518 unless --size")
    parser.add_argument('--video-depth-anything', nargs=2, default=None, metavar=('ENCODER', 'REPO'),
                        help="Video Depth Anything (vits, vitb or vitl) forward of one clip (--batch frames, default "
                             "8; --size, default 280) vs the authors' VideoDepthAnything from REPO, a clone of "
                             "DepthAnything/Video-Depth-Anything")
    parser.add_argument('--profile', type=int, default=0, metavar='RUNS',
                        help='with a reference comparison (backbones, --dpt, --depth-anything): also profile RUNS '
                             'runs of each side (torch.profiler, alternating) and print the aten operators ours '
                             'and the reference spend their self time in, side by side (lab.benchmark.op_profile)')
    parser.add_argument('--sweep', type=int, nargs='+', metavar='SIZE', default=None,
                        help="inference of the (first --dense, default ViT-B) config's model at these square sizes, "
                             "SDPA vs explicit attention; writes a PNG beside --out")
    return parser


def main(argv=None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    from lab.records.rows import tool_command
    args.command = tool_command(__file__, argv)  # for the records
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.sweep:
        return main_sweep(args)
    if args.dense is not None:
        return main_dense(args)
    if args.dpt:
        return main_dpt(args)
    if args.depth_anything:
        return main_depth_anything(args)
    if args.video_depth_anything:
        return main_video_depth_anything(args, parser)
    import zoo
    from lab.benchmark.reference import COLUMNS, benchmark
    from lab.benchmark.tables import format_row, header_rows, markdown
    from zoo.registry import get_variant
    unknown = [m for m in args.models if m not in zoo.list_backbones()]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; see python tools/list_models.py")
    batch = (args.batch or [8])[0]
    sizes = {name: args.size or get_variant(name).input_size[0] for name in args.models}  # timm's default
    size = '/'.join(str(s) for s in dict.fromkeys(sizes.values()))
    header = (f"Forward pass, batch {batch}, {size}x{size}, device {args.device}, "
              f"{torch.get_num_threads()} threads, torch {torch.__version__}; ratio = reference time / ours")
    print(header, *header_rows(COLUMNS), sep='\n')
    report = lambda row: print(format_row(row, COLUMNS), flush=True)  # noqa: E731
    rows = [r for name in args.models
            for r in benchmark(name, batch, sizes[name], args.dtypes or ['fp32', 'bf16'], args.device,
                               default(args.warmup, 2), default(args.iters, 5), report, args.profile, print)]
    write(args.out, markdown(rows, header, COLUMNS))
    for row in rows:
        reference = 'transformers' if row['model'].startswith('cvt_') else 'timm'
        row_record('benchmark.reference', row, args, settings=['model', 'dtype', 'batch'],
                   fixed={'size': f"{row['size']}x{row['size']}", 'mode': 'inference', 'reference': reference},
                   rounds={'ours': 'ours_rounds', 'reference': 'ref_rounds'})
    return rows


def row_record(series: str, row: dict, args, **how) -> None:
    """One record of ``row`` in the results store (lab.records.rows), with the command and device of ``args``."""
    from lab.records.rows import row_record as record
    record(series, row, device=args.device, command=args.command, **how)


def default(value, fallback):
    return fallback if value is None else value


def write(out: Path | None, text: str) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")


def policy_note(args) -> str:
    """The kernel policy ours runs with on the CPU (transformers' model runs torch's defaults), for a header."""
    from zoo.runtime.policy import describe
    return f"; ours: {describe().split(';')[0]}" if args.device == 'cpu' else ''


def main_dpt(args) -> list[dict]:
    import torch

    from lab.benchmark.reference import DPT_COLUMNS, benchmark_dpt
    from lab.benchmark.tables import format_row, header_rows, markdown
    size, batch, rounds = args.size or 512, (args.batch or [1])[0], default(args.iters, 3)
    header = (f"DPT ViT-B/16 segmentation (150 classes) vs transformers, {size}x{size}, batch {batch}, "
              f"device {args.device}, {torch.get_num_threads()} threads; ratios = ours / HF (< 1: ours better)"
              f"{policy_note(args)}")
    print(header, *header_rows(DPT_COLUMNS), sep='\n')
    rows = benchmark_dpt(batch, size, rounds, args.device, args.checkpointing,
                         report=lambda row: print(format_row(row, DPT_COLUMNS), flush=True),
                         profile_runs=args.profile, report_profile=print)
    write(args.out, markdown(rows, header, DPT_COLUMNS))
    for row in rows:
        row_record('benchmark.dpt', row, args, settings=['batch'],
                   fixed={'pass': DPT_PASSES[row['pass']], 'size': f'{size}x{size}', 'reference': 'transformers'},
                   rounds={'ours': 'ours_rounds', 'reference': 'hf_rounds'})
    return rows


#: benchmark_dpt's row labels -> the records' ``pass`` setting
DPT_PASSES = {'forward': 'forward', 'training step (fused AdamW)': 'train_step',
              'training step, activation checkpointing': 'train_step_checkpointing'}


def main_depth_anything(args) -> list[dict]:
    import torch

    from lab.benchmark.depth_anything import COLUMNS, benchmark_depth_anything
    from lab.benchmark.tables import format_row, header_rows, markdown
    size, batch, rounds = args.size or 518, (args.batch or [1])[0], default(args.iters, 5)
    header = (f"Depth Anything V2 vs transformers, forward fp32, {size}x{size}, batch {batch}, device {args.device}, "
              f"{torch.get_num_threads()} threads; ratios = ours / HF (< 1: ours better){policy_note(args)}")
    print(header, *header_rows(COLUMNS), sep='\n')
    rows = [benchmark_depth_anything(args.depth_anything, batch, size, rounds, args.device,
                                     report=lambda row: print(format_row(row, COLUMNS), flush=True),
                                     profile_runs=args.profile, report_profile=print)]
    write(args.out, markdown(rows, header, COLUMNS))
    row_record('benchmark.depth_anything', rows[0], args, settings=['model', 'batch'],
               fixed={'size': f'{size}x{size}', 'dtype': 'fp32', 'reference': 'transformers'},
               rounds={'ours': 'ours_rounds', 'reference': 'hf_rounds'})
    return rows


def main_video_depth_anything(args, parser) -> list[dict]:
    import torch

    from lab.benchmark.tables import format_row, header_rows, markdown
    from lab.benchmark.video_depth_anything import COLUMNS, SIZES, benchmark_video_depth_anything
    encoder, repo = args.video_depth_anything
    if encoder not in SIZES:
        parser.error(f"--video-depth-anything: encoder {encoder!r} is none of {', '.join(SIZES)}")
    size, frames, rounds = args.size or 280, (args.batch or [8])[0], default(args.iters, 5)
    header = (f"Video Depth Anything vs the authors' code, forward fp32 of one clip of {frames} frames, {size}x{size}, "
              f"{torch.get_num_threads()} threads; ratios = ours / theirs (< 1: ours better){policy_note(args)}")
    print(header, *header_rows(COLUMNS), sep='\n')
    rows = [benchmark_video_depth_anything(encoder, frames, size, rounds, Path(repo),
                                           report=lambda row: print(format_row(row, COLUMNS), flush=True))]
    write(args.out, markdown(rows, header, COLUMNS))
    row_record('benchmark.video_depth_anything', rows[0], args, settings=['model', 'frames'],
               fixed={'size': f'{size}x{size}', 'dtype': 'fp32', 'reference': 'authors'},
               rounds={'ours': 'ours_rounds', 'reference': 'authors_rounds'})
    return rows


def dense_configs(args) -> dict:
    """name -> config: each --dense config, or the first with each of --backbones."""
    from heads.engine.launch import load_config
    from lab.benchmark.compare import backbone_configs
    paths = args.dense or [str(ROOT / 'configs' / 'dpt_vitb_ade20k.py')]
    if args.backbones:
        return backbone_configs(load_config(paths[0]), args.backbones)
    return {Path(p).stem: load_config(p) for p in paths}


def main_dense(args) -> list[dict]:
    import torch

    from lab.benchmark.compare import crop_size
    from lab.benchmark.dense import benchmark_models
    from lab.benchmark.tables import format_row, header_rows, markdown
    from zoo.runtime.gemm import onednn_speedup
    from zoo.runtime.policy import describe
    torch.backends.cudnn.benchmark = True  # GPU: pick the fastest convolution algorithms for these fixed shapes
    configs = dense_configs(args)
    linears = (f"; {describe()} (oneDNN measured {onednn_speedup():.2f}x MKL's speed here)"
               if args.device == 'cpu' else '')
    sizes = {name: (args.size, args.size) if args.size else crop_size(cfg) for name, cfg in configs.items()}
    header = (f"Whole models, device {args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
              f"GFLOP_s = 2 x MACs / forward time; matmul_GFLOP_s = this machine's rate on 2048^3 Linear products in "
              f"the same dtype (fp32 CPU: the library the models' Linears use, zoo.runtime.gemm), timed in rounds "
              f"alternating with the forward; matmul_pct = median over rounds of "
              f"the model's rate / the matmul rate; training: a step (forward, backward, fused AdamW) of 3 x the "
              f"forward's FLOPs, timed the same way (train_matmul_pct){linears}")
    print(header, *header_rows(DENSE_COLUMNS), sep='\n')
    rows = benchmark_models(
        configs, sizes=sizes, batches=args.batch or [1], dtypes=args.dtypes or ['fp32'], layouts=args.layouts,
        checkpointing=[False, True] if args.checkpointing else [False], compile=args.compile, train=args.train,
        device=args.device, iters=default(args.iters, 3), warmup=default(args.warmup, 1),
        report=lambda row: print(format_row(row, DENSE_COLUMNS), flush=True))
    write(args.out, markdown(rows, header, DENSE_COLUMNS))
    for row in rows:  # sides: the forward ('ours') and training step, each with the matmul timed in its rounds
        row_record('benchmark.dense', row, args,
                   settings=['model', 'dtype', 'layout', 'ckpt', 'compile', 'batch', 'size'],
                   rounds={'ours': 'fwd_rounds', 'matmul': 'matmul_rounds', 'train': 'train_rounds',
                           'train_matmul': 'train_matmul_rounds'})
    return rows


def main_sweep(args) -> list[dict]:
    import torch

    from lab.benchmark.dense import plot_sweep, resolution_sweep
    from lab.benchmark.tables import format_row, header_rows, markdown
    name, cfg = next(iter(dense_configs(args).items()))
    dtype = (args.dtypes or ['fp32'])[0]
    header = (f"{name}: batch-1 inference against input size, SDPA vs explicit attention, {dtype}, device "
              f"{args.device}, {torch.get_num_threads()} threads")
    print(header, *header_rows(SWEEP_COLUMNS), sep='\n')
    rows = resolution_sweep(cfg, args.sweep, device=args.device, dtype=dtype, iters=default(args.iters, 3),
                            report=lambda row: print(format_row(row, SWEEP_COLUMNS), flush=True))
    write(args.out, markdown(rows, header, SWEEP_COLUMNS))
    for row in rows:
        row_record('benchmark.sweep', row, args, settings=['attention', 'dtype'],
                   fixed={'model': name, 'size': f"{row['size']}x{row['size']}", 'batch': 1},
                   rounds={'ours': 'rounds'})
    if args.out:
        plot_sweep(rows, args.out.with_suffix('.png'))
        print(f"wrote {args.out.with_suffix('.png')}")
    return rows


DENSE_COLUMNS = ['model', 'dtype', 'layout', 'ckpt', 'compile', 'batch', 'size', 'params_M', 'GMACs', 'fwd_img_s',
                 'GFLOP_s', 'matmul_GFLOP_s', 'matmul_pct', 'fwd_peak_MiB', 'train_img_s', 'train_GFLOP_s',
                 'train_matmul_pct', 'train_peak_MiB']
SWEEP_COLUMNS = ['size', 'tokens', 'attention', 'dtype', 'seconds', 'peak_MiB', 'backbone_peak_MiB']


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
