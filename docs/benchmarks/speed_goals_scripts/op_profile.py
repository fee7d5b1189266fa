"""Where ours and timm's model of the same name (same weights) spend a forward, op by op, in interleaved rounds.

    OMP_NUM_THREADS=1 python docs/benchmarks/speed_goals_scripts/op_profile.py levit_256 --rounds 7
    OMP_NUM_THREADS=1 python docs/benchmarks/speed_goals_scripts/op_profile.py coatnet_0_rw_224 --batch 16 \
        --rounds 2 --shapes mkldnn_convolution,addmm,copy_

Each round profiles one forward of each model (torch.profiler, CPU), alternating which goes first; printed: per aten
op the median over rounds of its self time per forward (a markdown table), and with ``--shapes`` those ops' times per
input shape (call counts per forward).
"""
import argparse
import collections

import torch
from timm_pair import timm_pair  # this folder's: a script's folder is first on sys.path
from torch.profiler import ProfilerActivity, profile

from zoo.profiling import median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('name')
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--top', type=int, default=20, help='rows of the per-op table')
    parser.add_argument('--shapes', default='', help='comma-separated op names to break down by input shape')
    args = parser.parse_args()
    ours, ref = timm_pair(args.name)
    x = torch.randn(args.batch, 3, 224, 224)
    models = {'ours': ours, 'timm': ref}
    keep = set(filter(None, args.shapes.split(',')))
    per_op = {k: collections.defaultdict(list) for k in models}
    per_shape = {k: collections.defaultdict(list) for k in models}
    totals = {k: [] for k in models}
    with torch.inference_mode():
        for model in models.values():
            model(x), model(x)
        for r in range(args.rounds):
            for label in (list(models) if r % 2 == 0 else list(models)[::-1]):
                with profile(activities=[ProfilerActivity.CPU], record_shapes=bool(keep)) as prof:
                    models[label](x)
                events = prof.key_averages()
                for e in events:
                    per_op[label][e.key].append(e.self_cpu_time_total / 1e3)
                totals[label].append(sum(e.self_cpu_time_total for e in events) / 1e3)
                for e in prof.key_averages(group_by_input_shape=True) if keep else []:
                    if e.key.split('::')[-1] in keep:
                        per_shape[label][(e.key, e.count, str(e.input_shapes))].append(e.self_cpu_time_total / 1e3)
    print(f"{args.name} batch {args.batch}, {torch.get_num_threads()} threads, {args.rounds} interleaved rounds; "
          f"median self ms per forward (total ours {median(totals['ours']):.1f}, timm {median(totals['timm']):.1f})")
    ops = sorted(set(per_op['ours']) | set(per_op['timm']),
                 key=lambda k: -max(median(per_op[m][k] or [0.0]) for m in models))
    print('| op | ours ms | timm ms |\n|---|---|---|')
    for op in ops[:args.top]:
        print(f"| {op} | {median(per_op['ours'][op] or [0.0]):.2f} | {median(per_op['timm'][op] or [0.0]):.2f} |")
    for label in models if keep else []:
        print(f'--- {label} by input shape')
        for (op, count, shapes), times in sorted(per_shape[label].items(), key=lambda kv: -median(kv[1])):
            print(f'{op:28s} n={count:3d} {median(times):8.2f} ms {shapes}')


if __name__ == '__main__':
    main()
