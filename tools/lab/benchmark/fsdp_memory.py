"""Per-process memory of DDP and FSDP training, on CPU (gloo) or GPU, for docs/distributed.md:

    torchrun --standalone --nproc_per_node 2 tools/lab/benchmark/fsdp_memory.py --strategy ddp
    torchrun --standalone --nproc_per_node 2 tools/lab/benchmark/fsdp_memory.py --strategy fsdp

One launch per strategy (peak RSS is a process's lifetime maximum). The model: the quickstart's DPT with a ViT-S/16
backbone (12 blocks, 384 wide) at ``--size`` (224); ``--steps`` AdamW steps on a synthetic loss (the mean of the
logits), ``--batch`` images per process (2). Each process reports two figures:

- ``counted``: the bytes of its parameters and optimizer-state tensors (local shards under FSDP, whole tensors
  under DDP), :func:`heads.engine.distributed.fsdp.held_bytes`; gradients are not included;
- ``peak RSS - start``: the growth of its resident memory from before the model is built (after the imports and
  a first build, whose memory is freed) to the end (CPU), or the peak of allocated CUDA memory; this includes
  gradients, activations, DDP's gradient buckets, FSDP's gathered blocks and the whole model every process builds
  before sharding it, and on CPU whatever the allocator keeps.
"""
from __future__ import annotations

import argparse
import os
import resource
from pathlib import Path

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[3]


def rss_bytes() -> int:
    """This process's resident memory now (Linux)."""
    return int(Path('/proc/self/statm').read_text().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build_model(device: str, size: int):
    from mmengine.config import Config

    import heads  # noqa: F401  (registers the parts)
    from heads.registry import MODELS
    cfg = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))
    cfg.model.backbone = dict(type='ZooBackbone', name='vit_small_patch16_224', img_size=(size, size),
                              out_indices=(2, 5, 8, 11))
    return MODELS.build(cfg.model).to(device)


def measure(strategy: str, steps: int, size: int, batch: int) -> list[dict]:
    from torch.nn.parallel import DistributedDataParallel

    from heads.engine.distributed.fsdp import FullyShardedModel, held_bytes
    cuda = torch.cuda.is_available()
    device = f'cuda:{os.environ.get("LOCAL_RANK", 0)}' if cuda else 'cpu'
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group('nccl' if cuda else 'gloo')
    torch.manual_seed(0)
    from torch.distributed.fsdp import fully_shard  # noqa: F401  (loaded before the baseline, as by both)
    build_model(device, 32)
    start = rss_bytes()
    model = build_model(device, size)
    params = sum(p.numel() for p in model.parameters())
    wrapped = FullyShardedModel(model) if strategy == 'fsdp' else DistributedDataParallel(
        model, device_ids=None, find_unused_parameters=True)
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-4)
    x = torch.randn(batch, 3, size, size, device=device)
    for _ in range(steps):
        wrapped(x, mode='tensor').float().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    local, full = held_bytes(model, optimizer)  # the sharded module under FSDP, the whole one under DDP
    grown = torch.cuda.max_memory_allocated(device) if cuda else peak_rss_bytes() - start
    row = dict(rank=dist.get_rank(), strategy=strategy, params=params, counted=local, unsharded=full, grown=grown)
    rows = [None] * dist.get_world_size()
    dist.all_gather_object(rows, row)
    dist.destroy_process_group()
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--strategy', choices=['ddp', 'fsdp'], required=True)
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--size', type=int, default=224, help='input side (activations grow with its square)')
    parser.add_argument('--batch', type=int, default=2, help='images per process')
    args = parser.parse_args(argv)
    rows = measure(args.strategy, args.steps, args.size, args.batch)
    if rows[0] and int(os.environ.get('RANK', 0)) == 0:
        what = 'peak CUDA memory allocated' if torch.cuda.is_available() else 'peak RSS - RSS before the model'
        print(f"{args.strategy}, {len(rows)} processes, {rows[0]['params'] / 1e6:.1f} M parameters, AdamW, "
              f"batch {args.batch} of {args.size}x{args.size} per process:")
        for r in rows:
            print(f"  rank {r['rank']}: parameters + optimizer state {r['counted'] / 2 ** 20:.1f} MiB "
                  f"(unsharded {r['unsharded'] / 2 ** 20:.1f} MiB); {what} {r['grown'] / 2 ** 20:.1f} MiB")


if __name__ == '__main__':
    main()
