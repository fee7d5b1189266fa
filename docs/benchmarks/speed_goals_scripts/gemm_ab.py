"""Two kernel choices of ours beside timm's model of the same name, in interleaved rounds of one process.

The kernel policy's GEMM choice (default): ours with torch's (MKL) fp32 GEMMs, ours with oneDNN's
(``ZOO_CPU_GEMM``, read at each product). With ``--attention``: ours with SDPA attention, ours with the explicit
softmax(q k^T) v path (``zoo.core.set_fused_attention``, switched before each call).

    python docs/benchmarks/speed_goals_scripts/gemm_ab.py coatnet_0_rw_224 levit_256 swin_tiny_patch4_window7_224 \
        --threads 2 --rounds 10
    python docs/benchmarks/speed_goals_scripts/gemm_ab.py swin_tiny_patch4_window7_224 --attention --rounds 10

Prints, per model, the median forward time of each side and the median over rounds of the paired ratios timm / ours
(wall clock), batch 8 fp32 at 224, the same weights on every side.
"""
import argparse
import os
import time

import timm
import torch

import zoo
from zoo.core import set_fused_attention
from zoo.profiling import interleaved_rounds, median
from zoo.runtime import apply_kernel_policy


def gemm(choice: str):
    def switch(model):
        os.environ['ZOO_CPU_GEMM'] = choice
    return switch


def attention(fused: bool):
    return lambda model: set_fused_attention(model, fused)


CHOICES = {False: {'MKL': gemm('torch'), 'oneDNN': gemm('onednn')},
           True: {'SDPA': attention(True), 'explicit': attention(False)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('names', nargs='+')
    parser.add_argument('--attention', action='store_true', help='SDPA against the explicit path (default: GEMMs)')
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    choices = CHOICES[args.attention]
    for name in args.names:
        torch.manual_seed(0)
        ref = timm.create_model(name, pretrained=False).eval()
        ours = zoo.create_classifier(name).eval()
        zoo.load_pretrained(ours, ref.state_dict())
        apply_kernel_policy(ours)
        x = torch.randn(args.batch, 3, 224, 224)

        def timed(model, switch=None):
            def run():
                if switch:
                    switch(model)
                start = time.perf_counter()
                model(x)
                return time.perf_counter() - start
            return run

        with torch.inference_mode():
            diffs = []
            for switch in choices.values():
                switch(ours)
                diffs.append((ours(x) - ref(x)).abs().max().item())
                ours(x)
            ref(x)
            *sides, reference = interleaved_rounds([timed(ours, s) for s in choices.values()] + [timed(ref)],
                                                   args.rounds)
        os.environ.pop('ZOO_CPU_GEMM', None)
        set_fused_attention(ours, True)
        figures = ', '.join(f"ours {label} {median(side) * 1e3:.0f} ms "
                            f"({'timm / ours ' if not i else ''}{median([r / o for o, r in zip(side, reference)]):.3f})"
                            for i, (label, side) in enumerate(zip(choices, sides)))
        print(f"{name}: batch {args.batch}, {args.threads} threads, {args.rounds} rounds; {figures}, timm "
              f"{median(reference) * 1e3:.0f} ms; max diff {max(diffs):.1e}", flush=True)


if __name__ == '__main__':
    main()
