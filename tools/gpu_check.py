r"""The GPU acceptance run: one table of what this project's GPU path does on this machine (under 8 minutes).

    python tools/gpu_check.py --out docs/benchmarks/gpu_check_<GPU>_<date>.md

On CUDA: DPT ViT-B/16 at 512x512, batch 8, bf16 autocast: training img/s, peak memory and achieved TFLOP/s as a
share of the bf16 matmul rate measured on the GPU; whether SDPA's flash kernel runs every attention call (counted
by torch's profiler); inference img/s; 1024x1024 inference memory; eager vs torch.compile (a 'skipped' row under
--no-compile); a 1-GPU NCCL DDP smoke run of tools/train.py and an FSDP one (--strategy fsdp on every GPU, bf16
parameters, with rank 0's share of the bytes); fp16 autocast training with dynamic loss scaling; DDP with
SyncBatchNorm under bf16 autocast; two --deterministic runs with their weights compared. Without CUDA
it says so and runs the same steps tiny on the CPU, FSDP on two gloo processes (the test suite runs that path).
tools/lab/benchmark/gpu_check.py describes each step. Each step that measured something is one record of series
gpu_check in the results store (on CUDA in the GPU's store file), with every timed round of the timed steps.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('--device', default=None, help="'cuda', 'cuda:N' or 'cpu' (default: cuda if present)")
    parser.add_argument('--no-compile', action='store_true', help='skip the eager vs torch.compile step')
    parser.add_argument('--out', type=Path, help='also write the table (Markdown) here')
    return parser


def main(argv=None) -> list[dict]:
    args = build_parser().parse_args(argv)
    from lab.benchmark.gpu_check import gpu_check, report
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)

    def progress(rows, header):  # the table so far, rewritten after each step: a run cut short still leaves it
        if args.out:
            args.out.write_text(report(rows, header))

    rows, header = gpu_check(args.device, compile=not args.no_compile, progress=progress)
    print(report(rows, header))
    record(rows, args.device, argv)
    return rows


def record(rows: list[dict], device: str | None, argv) -> None:
    """Each row that measured something (``metrics``, ``rounds``) as one record of series gpu_check: settings the
    step, the device ('cuda' or 'cpu': the store file is the GPU's on CUDA) and the dtype it ran in."""
    import torch

    from lab.benchmark.gpu_check import plan
    from lab.records.rows import device_kind, row_record, tool_command
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    cell = {'device': device_kind(device), 'dtype': plan(device)['dtype']}
    for row in rows:
        if row.get('metrics') or row.get('rounds'):
            row_record('gpu_check', {**row.get('metrics', {}), **row.get('rounds', {})}, fixed={'step': row['step'],
                       **cell}, rounds={side: side for side in row.get('rounds', {})}, device=device,
                       command=tool_command(__file__, argv))


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
