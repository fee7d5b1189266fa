"""What a large tensor's first touch costs on this machine: the same work into a new tensor and into one in use.

Swin-T's stage-1 MLP product at batch 8 ('25088 96 -> 25088 384', 38.5 MiB of output, above glibc's largest mmap
threshold, so each new one is fresh pages): fill, ``F.linear`` and ``gelu``, each into a new tensor and with
``out=`` into one already written; best of 7 after a warm-up, milliseconds.

    python docs/benchmarks/speed_goals_scripts/first_touch.py --threads 2
    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
        python docs/benchmarks/speed_goals_scripts/first_touch.py --threads 2
"""
import argparse
import os

import torch
import torch.nn.functional as F

from zoo.runtime.gemm import best_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--threads', type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows, width = 25088, 96
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, width, generator=generator)
    w, b = torch.randn(4 * width, width, generator=generator), torch.randn(4 * width, generator=generator)
    hidden = F.linear(x, w, b)
    out = torch.empty_like(hidden).fill_(0)
    cases = {'fill': (lambda: torch.empty_like(hidden).fill_(0), lambda: out.fill_(0)),
             'linear (addmm)': (lambda: F.linear(x, w, b), lambda: torch.addmm(b, x, w.t(), out=out)),
             'gelu': (lambda: F.gelu(hidden), lambda: torch._C._nn.gelu(hidden, out=out))}
    print(f"{rows} x {4 * width} fp32 ({hidden.numel() * 4 / 2 ** 20:.1f} MiB), {args.threads} threads, "
          f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}")
    print('| op | into a new tensor ms | into one in use ms |')
    print('|---|---|---|')
    for name, (new, reused) in cases.items():
        print(f"| {name} | {best_seconds(new, 7) * 1e3:.2f} | {best_seconds(reused, 7) * 1e3:.2f} |")


if __name__ == '__main__':
    main()
