r"""UperNet Swin-T forward: ours (through ``heads.from_pretrained_hf``) against transformers'
``UperNetForSemanticSegmentation`` with the same weights, in the same process.

    python tools/benchmark_upernet.py --size 512 --rounds 5 --threads 1

Swin-T (embed 96, depths 2/2/6/2, window 7), UPerHead 512 channels, 150 classes, batch 1, fp32, eval; the
auxiliary head off on both (transformers' forward runs it even in eval; ours only for the loss). Runs interleave
(ours, reference, reference, ours, ...); the ratio is the median over rounds of reference time / ours (> 1: ours
faster). The outputs are compared first (relative max difference printed).
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pair(size: int, workdir: Path):
    """transformers' UperNet Swin-T (random weights, saved) and ours loaded from its folder."""
    import torch
    import transformers

    from heads.hf.folder import from_pretrained_hf
    swin = transformers.SwinConfig(embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=7,
                                   image_size=size, out_features=['stage1', 'stage2', 'stage3', 'stage4'])
    config = transformers.UperNetConfig(backbone_config=swin, hidden_size=512, num_labels=150,
                                        use_auxiliary_head=False)
    torch.manual_seed(0)
    ref = transformers.UperNetForSemanticSegmentation(config).eval()
    ref.save_pretrained(workdir)
    return from_pretrained_hf(workdir), ref


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--size', type=int, default=512, help='square input size (default: %(default)s)')
    parser.add_argument('--rounds', type=int, default=5, help='timed rounds, interleaved (default: %(default)s)')
    parser.add_argument('--threads', type=int, default=None, help='torch intra-op threads (default: torch decides)')
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    from zoo.profiling import interleaved_rounds, median, seconds_of
    from zoo.runtime import apply_kernel_policy
    with tempfile.TemporaryDirectory() as workdir:
        ours, ref = pair(args.size, Path(workdir))
    apply_kernel_policy(ours)  # as the runner does
    x = torch.randn(1, 3, args.size, args.size)
    calls = [lambda: ours(x, mode='tensor'), lambda: ref(pixel_values=x).logits]
    with torch.inference_mode():
        got, want = (call() for call in calls)  # also the warm-up
        difference = float((got - want).abs().max() / want.abs().max())
        times = interleaved_rounds([partial(seconds_of, call) for call in calls], args.rounds)
    row = {'size': args.size, 'threads': torch.get_num_threads(), 'ours_s': median(times[0]),
           'hf_s': median(times[1]), 'ratio': median([r / o for o, r in zip(*times)]),
           'relative_max_difference': difference, 'rounds_ours': times[0], 'rounds_hf': times[1]}
    print(f"UperNet Swin-T forward {args.size}x{args.size}, batch 1, fp32, {row['threads']} threads, "
          f"torch {torch.__version__}, {platform.processor() or platform.machine()}")
    print(f"ours {row['ours_s']:.2f} s, transformers {row['hf_s']:.2f} s, ratio (HF / ours, median of paired "
          f"rounds) {row['ratio']:.3f}; outputs differ by {difference:.1e} of their scale")
    print('rounds ours:', ' '.join(f'{t:.2f}' for t in times[0]), '| hf:', ' '.join(f'{t:.2f}' for t in times[1]))
    return row


if __name__ == '__main__':
    main()
