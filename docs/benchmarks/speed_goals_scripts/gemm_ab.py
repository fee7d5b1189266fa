"""Ours with torch's (MKL) fp32 GEMMs, ours with oneDNN's, and timm's model of the same name, in interleaved rounds
of one process: the kernel policy's GEMM choice (``ZOO_CPU_GEMM``, read at each product) measured on this CPU.

    python docs/benchmarks/speed_goals_scripts/gemm_ab.py coatnet_0_rw_224 levit_256 swin_tiny_patch4_window7_224 \
        --threads 2 --rounds 10

Prints, per model, the median forward time of each side and the median over rounds of the paired ratios timm / ours
(wall clock), batch 8 fp32 at 224, the same weights on every side.
"""
import argparse
import os
import time

import timm
import torch

import zoo
from zoo.profiling import interleaved_rounds, median
from zoo.runtime import apply_kernel_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('names', nargs='+')
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.names:
        torch.manual_seed(0)
        ref = timm.create_model(name, pretrained=False).eval()
        ours = zoo.create_classifier(name).eval()
        zoo.load_pretrained(ours, ref.state_dict())
        apply_kernel_policy(ours)
        x = torch.randn(args.batch, 3, 224, 224)

        def timed(model, gemm=None):
            def run():
                if gemm:
                    os.environ['ZOO_CPU_GEMM'] = gemm
                start = time.perf_counter()
                model(x)
                return time.perf_counter() - start
            return run

        with torch.inference_mode():
            diffs = []
            for gemm in ('torch', 'onednn'):
                os.environ['ZOO_CPU_GEMM'] = gemm
                diffs.append((ours(x) - ref(x)).abs().max().item())
                ours(x)
            ref(x)
            mkl, onednn, reference = interleaved_rounds([timed(ours, 'torch'), timed(ours, 'onednn'), timed(ref)],
                                                        args.rounds)
        os.environ.pop('ZOO_CPU_GEMM')
        ms = [median(t) * 1e3 for t in (mkl, onednn, reference)]
        ratios = [median([r / o for o, r in zip(side, reference)]) for side in (mkl, onednn)]
        print(f"{name}: batch {args.batch}, {args.threads} threads, {args.rounds} rounds; ours MKL {ms[0]:.0f} ms "
              f"(timm / ours {ratios[0]:.3f}), ours oneDNN {ms[1]:.0f} ms ({ratios[1]:.3f}), timm {ms[2]:.0f} ms; "
              f"max diff {max(diffs):.1e}", flush=True)


if __name__ == '__main__':
    main()
