"""Swin-T's window attention written three ways with torch's CPU kernels, timed on its own shapes in one process.

Each way goes from a stage's window tokens '(b nW n) c' (n = 49) through the qkv product to the output
projection's input '(b nW n) c', with the relative position bias and, in shifted blocks, the region mask:

- ``sdpa`` (ours): one fused qkv Linear, q, k, v as strided views, ``scaled_dot_product_attention`` with the bias
  (and mask) as ``attn_mask``; its output is already '(b nW) n (h d)' in memory;
- ``explicit`` (timm's): the same Linear, then ``q * scale``, ``q @ k^T`` (copies k), ``+ bias`` (``+ mask``),
  ``softmax``, ``@ v`` (copies v), and the copy back to '(b nW) n (h d)';
- ``head-major``: the qkv product as one batched GEMM per head ('(3 h) (b nW n) d'), so that q, k, v come out
  contiguous for ``bmm`` with no copies; scale, bias and mask in place, ``softmax``, ``bmm``, one copy back.

Swin-T at 224: stages (width, heads, windows per image, blocks) (96, 3, 64, 2), (192, 6, 16, 2), (384, 12, 4, 6),
(768, 24, 1, 2); every other block of the first three stages is shifted (the last stage's 7 x 7 map is one window,
not shifted). Prints per stage and for the whole network (blocks weighted) the median over interleaved rounds of
each way's time, the qkv product's share of it, and each way's time / ``sdpa``'s (median of paired ratios).

    python docs/benchmarks/speed_goals_scripts/window_attention_ab.py --batch 8 --threads 2 --rounds 10
"""
import argparse
import time

import torch
import torch.nn.functional as F

from zoo.profiling import interleaved_rounds, median

N = 49  # tokens per 7 x 7 window
STAGES = [(96, 3, 64, 2), (192, 6, 16, 2), (384, 12, 4, 6), (768, 24, 1, 2)]  # width, heads, windows, blocks


class Stage:
    """One stage's weights, tokens, bias and mask, and the three ways of computing its attention."""

    def __init__(self, c: int, heads: int, windows: int, batch: int, generator: torch.Generator):
        self.c, self.h, self.nw, self.b = c, heads, windows, batch
        self.d, self.rows = c // heads, batch * windows * N
        self.scale = self.d ** -0.5
        self.x = torch.randn(self.rows, c, generator=generator)
        self.weight = torch.randn(3 * c, c, generator=generator) * c ** -0.5
        self.bias = torch.randn(3 * c, generator=generator)
        self.pos = torch.randn(heads, N, N, generator=generator)  # relative position bias, 'h n n'
        self.mask = (torch.rand(windows, N, N, generator=generator) < 0.3).float() * -100.0  # 'nW n n'
        # head-major weights '(3 h) c d' and bias '(3 h) 1 d'
        self.weight_heads = self.weight.view(3 * heads, self.d, c).transpose(1, 2).contiguous()
        self.bias_heads = self.bias.view(3 * heads, 1, self.d)

    def _heads_first(self, shifted: bool) -> torch.Tensor:
        """The additive bias as ours and timm's build it, '(b nW) h n n' when shifted, else '1 h n n'."""
        if not shifted:
            return self.pos[None]
        return self.pos[None] + self.mask[:, None].repeat(self.b, 1, 1, 1)

    def qkv(self) -> torch.Tensor:
        return F.linear(self.x, self.weight, self.bias)

    def sdpa(self, shifted: bool) -> torch.Tensor:
        q, k, v = self.qkv().view(-1, N, 3, self.h, self.d).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self._heads_first(shifted), scale=self.scale)
        return out.transpose(1, 2).reshape(self.rows, self.c)

    def explicit(self, shifted: bool) -> torch.Tensor:
        q, k, v = self.qkv().view(-1, N, 3, self.h, self.d).permute(2, 0, 3, 1, 4).unbind(0)
        scores = (q * self.scale) @ k.transpose(-2, -1) + self._heads_first(False)
        if shifted:
            scores = (scores.view(self.b, self.nw, self.h, N, N) + self.mask[None, :, None]).view(-1, self.h, N, N)
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(self.rows, self.c)

    def qkv_heads(self) -> torch.Tensor:
        return torch.baddbmm(self.bias_heads, self.x.expand(3 * self.h, -1, -1), self.weight_heads)

    def head_major(self, shifted: bool) -> torch.Tensor:
        q, k, v = self.qkv_heads().view(3, -1, N, self.d).unbind(0)  # each '(h b nW) n d', contiguous
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(self.scale)
        bias = self.pos[:, None, None] + (self.mask[None, None] if shifted else 0)  # 'h 1 nW n n' or 'h 1 1 n n'
        scores.view(self.h, self.b, -1, N, N).add_(bias)
        out = torch.bmm(scores.softmax(-1), v)
        return out.view(self.h, self.rows, self.d).transpose(0, 1).reshape(self.rows, self.c)


WAYS = ('sdpa', 'explicit', 'head_major')
QKV = {'sdpa': 'qkv', 'explicit': 'qkv', 'head_major': 'qkv_heads'}


def network(stages, way: str):
    """One forward's attention of ``way`` over every block (the qkv product included)."""
    def run() -> float:
        start = time.perf_counter()
        for stage, (*_, blocks) in zip(stages, STAGES):
            for block in range(blocks):
                getattr(stage, way)(shifted=block % 2 == 1 and stage.nw > 1)
        return time.perf_counter() - start
    return run


def products(stages, way: str):
    def run() -> float:
        start = time.perf_counter()
        for stage, (*_, blocks) in zip(stages, STAGES):
            for _ in range(blocks):
                getattr(stage, QKV[way])()
        return time.perf_counter() - start
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    stages = [Stage(c, h, nw, args.batch, generator) for c, h, nw, _ in STAGES]
    with torch.inference_mode():
        for stage in stages:
            for shifted in (False, True):
                ref = stage.sdpa(shifted)
                for way in WAYS[1:]:
                    diff = (getattr(stage, way)(shifted) - ref).abs().max().item()
                    assert diff < 1e-4, f"{way} differs from sdpa by {diff:.1e} (width {stage.c}, shifted {shifted})"
        measures = [network(stages, w) for w in WAYS] + [products(stages, w) for w in WAYS]
        for measure in measures:
            measure()
        times = interleaved_rounds(measures, args.rounds)
    whole, qkv = times[:len(WAYS)], times[len(WAYS):]
    print(f"Swin-T window attention (12 blocks, qkv product to projection input), batch {args.batch}, "
          f"{args.threads} threads, {args.rounds} rounds, torch {torch.__version__}, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print('| way | attention ms | of which qkv product ms | rest ms | attention / sdpa | rest / sdpa rest |')
    print('|---|---|---|---|---|---|')
    rest_sdpa = median(whole[0]) - median(qkv[0])
    for way, w, p in zip(WAYS, whole, qkv):
        rest = median(w) - median(p)
        ratio = median([a / s for a, s in zip(w, whole[0])])
        print(f"| {way} | {median(w) * 1e3:.1f} | {median(p) * 1e3:.1f} | {rest * 1e3:.1f} | {ratio:.3f} | "
              f"{rest / rest_sdpa:.3f} |")


if __name__ == '__main__':
    main()
