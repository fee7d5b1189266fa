"""Ours against timm's model of the same name (same weights), forward in interleaved rounds: wall and process CPU time.

    OMP_NUM_THREADS=1 python docs/benchmarks/speed_goals_scripts/ab_cpu_time.py levit_256 --rounds 20

Prints the median forward time of each and the median over rounds of the paired ratio timm / ours, by the wall clock
and by ``time.process_time`` (the CPU time of the process: with one thread it leaves out the time spent waiting for
a core on a busy machine). Ours is built, loads timm's state dict and takes the kernel policy, as tools/benchmark.py.
"""
import argparse
import time

import torch
from timm_pair import timm_pair  # this folder's: a script's folder is first on sys.path

from zoo.profiling import interleaved_rounds, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('name')
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--rounds', type=int, default=10)
    args = parser.parse_args()
    ours, ref = timm_pair(args.name)
    x = torch.randn(args.batch, 3, args.size, args.size)

    def timed(model):
        def run():
            wall, cpu = time.perf_counter(), time.process_time()
            model(x)
            return time.perf_counter() - wall, time.process_time() - cpu
        return run

    with torch.inference_mode():
        diff = (ours(x) - ref(x)).abs().max().item()
        for _ in range(2):
            ours(x), ref(x)
        o, r = interleaved_rounds([timed(ours), timed(ref)], args.rounds)
    summary = []
    for i, clock in enumerate(('wall', 'cpu')):
        ours_ms, timm_ms = (median([t[i] for t in times]) * 1e3 for times in (o, r))
        ratio = median([b[i] / a[i] for a, b in zip(o, r)])
        summary.append(f"{clock}: ours {ours_ms:.1f} ms, timm {timm_ms:.1f} ms, ratio {ratio:.3f}")
    print(f"{args.name} batch {args.batch}, {torch.get_num_threads()} threads, {args.rounds} rounds, max diff "
          f"{diff:.1e}; " + '; '.join(summary))


if __name__ == '__main__':
    main()
