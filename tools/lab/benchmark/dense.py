"""Benchmarks of whole dense models (backbone + DPT neck + head) built from configs (``tools/benchmark.py --dense``
and ``--sweep``).

- :func:`benchmark_models`: forward (and training) img/s, achieved GFLOP/s against this machine's matmul rate
  measured in the same rounds, and peak memory, for each model x dtype x layout x batch (x checkpointing, x compile);
- :func:`resolution_sweep`: inference time and peak memory against token count, SDPA vs the explicit path.
"""
from __future__ import annotations

import contextlib
import copy
import itertools

import torch
from tqdm import tqdm

from heads.registry import MODELS
from zoo.core import set_fused_attention, set_grad_checkpointing
from zoo.profiling import count_macs, count_params, median, peak_memory, seconds_of
from zoo.runtime import apply_kernel_policy
from zoo.runtime.gemm import linear

DTYPES = {'fp32': None, 'bf16': torch.bfloat16}


def autocast(device: torch.device, dtype: str):
    return torch.autocast(device.type, dtype=DTYPES[dtype]) if DTYPES[dtype] else contextlib.nullcontext()


def round_seconds(fn, device: torch.device, iters: int, warmup: int) -> list[float]:
    """Seconds of each of ``iters`` timed calls of ``fn``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    return [seconds_of(fn, device) for _ in range(iters)]


def median_seconds(fn, device: torch.device, iters: int, warmup: int) -> float:
    return median(round_seconds(fn, device, iters, warmup))


def matmul_call(device: torch.device, dtype: str, n: int = 2048, seconds: float = 0.5):
    """(call, FLOPs): n x n x n products with a bias through :func:`zoo.runtime.gemm.linear`, what every Linear
    runs under the kernel policy (``F.linear``, or oneDNN's where :func:`zoo.runtime.gemm.uses_onednn` picks it),
    repeated to last about ``seconds``."""
    x, weight = (torch.randn(n, n, device=device, dtype=DTYPES[dtype] or torch.float32) for _ in range(2))
    bias = torch.randn(n, device=device, dtype=x.dtype)
    once = lambda: linear(x, weight, bias)  # noqa: E731
    once()
    repeats = max(1, round(seconds / seconds_of(once, device)))

    def call():
        for _ in range(repeats):
            once()
    return call, 2 * n ** 3 * repeats


def matmul_gflops(device: str = 'cpu', dtype: str = 'fp32', n: int = 2048, iters: int = 5) -> float:
    """This machine's measured matmul rate (GFLOP/s, median of ``iters`` timings)."""
    device = torch.device(device)
    call, flops = matmul_call(device, dtype, n)
    return flops / median_seconds(call, device, iters, warmup=1) / 1e9


def forward_against_matmul(forward, flops: float, device: torch.device, dtype: str, iters: int, warmup: int):
    """(seconds, matmul GFLOP/s, model rate / matmul rate): the model's pass (a forward, or a training step with
    its FLOPs) and the matmul timed in alternating rounds, each ratio taken within its round, so that the
    machine's drift hits both alike."""
    return timed_against_matmul(forward, flops, device, dtype, iters, warmup)[:3]


def timed_against_matmul(forward, flops: float, device: torch.device, dtype: str, iters: int, warmup: int):
    """:func:`forward_against_matmul`'s figures and a fourth: ``(pass seconds, matmul seconds)`` of each round."""
    matmul, matmul_flops = matmul_call(device, dtype)
    for _ in range(warmup):
        forward()
    rounds = [(seconds_of(forward, device), seconds_of(matmul, device)) for _ in range(iters)]
    return (median([f for f, _ in rounds]), median([matmul_flops / m / 1e9 for _, m in rounds]),
            median([(flops / f) / (matmul_flops / m) for f, m in rounds]), rounds)


def build_model(cfg, device: str, channels_last: bool = True, checkpointing: bool = False):
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.channels_last = channels_last
    if model_cfg.get('backbone', {}).get('pretrained'):  # timing needs no weights (the file may be absent)
        model_cfg.backbone.pretrained = None
    model = MODELS.build(model_cfg).to(device)
    apply_kernel_policy(model)  # as the runner does (tools/benchmark.py prints its choice)
    return set_grad_checkpointing(model, checkpointing)


def output_scalar(out) -> torch.Tensor:
    """A scalar that every output of ``model(x, mode='tensor')`` feeds (one tensor, or the class and mask logits of
    the mask-classification heads), for a backward through all of them."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(o.float().mean() for o in outs if isinstance(o, torch.Tensor))


def forward_fn(model, x, dtype: str):
    def run():
        with torch.inference_mode(), autocast(x.device, dtype):
            model(x, mode='tensor')
    return run


def train_fn(model, x, dtype: str, keep_grads: bool = False):
    """One forward + backward of the model's output (train mode: dropout, batch statistics); the gradients are
    freed after it unless ``keep_grads``."""
    def run():
        with autocast(x.device, dtype):
            out = model(x, mode='tensor')
        output_scalar(out).backward()
        if not keep_grads:
            for p in model.parameters():
                p.grad = None
    return run


def train_step_fn(model, x, dtype: str):
    """One training step: forward + backward of the model's output and an AdamW step (fused: one kernel for all
    parameters, on CPU too; the per-parameter loop costs about 6x more), gradients freed after it."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6, fused=True)
    backward = train_fn(model, x, dtype, keep_grads=True)

    def run():
        backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return run


def warm(fn):
    """``fn`` after one call (a training step's optimizer state exists: the peak is then the step's own)."""
    fn()
    return fn


def peak_of(fn, device) -> float:
    with peak_memory(device) as mem:
        fn()
    return mem['peak_mib']


def benchmark_one(name: str, cfg, *, size, batch: int, dtype: str, device: str, channels_last: bool,
                  checkpointing: bool, compile: bool, train: bool, iters: int, warmup: int) -> dict:
    device = torch.device(device)
    model = build_model(cfg, device, channels_last, checkpointing)
    x = torch.randn(batch, 3, *size, device=device)
    model.eval()
    flops = 2 * count_macs(model, x[:1]) * batch
    runnable = torch.compile(model) if compile else model
    row = {'model': name, 'dtype': dtype, 'layout': 'channels_last' if channels_last else 'contiguous',
           'ckpt': checkpointing, 'compile': compile, 'batch': batch, 'size': f'{size[0]}x{size[1]}',
           'params_M': count_params(model) / 1e6, 'GMACs': flops / 2 / batch / 1e9}
    seconds, matmul_rate, share, rounds = timed_against_matmul(forward_fn(runnable, x, dtype), flops, device, dtype,
                                                               iters, warmup)
    row.update(fwd_img_s=batch / seconds, GFLOP_s=flops / seconds / 1e9, matmul_GFLOP_s=matmul_rate,
               matmul_pct=100 * share, fwd_peak_MiB=peak_of(forward_fn(model, x, dtype), device),
               fwd_rounds=[f for f, _ in rounds], matmul_rounds=[m for _, m in rounds])
    if train:  # training FLOPs: 3 x the forward's (backward: one product for the input, one for the weights)
        model.train()
        seconds, matmul_rate, share, rounds = timed_against_matmul(train_step_fn(runnable, x, dtype), 3 * flops,
                                                                   device, dtype, iters, warmup)
        row.update(train_img_s=batch / seconds, train_GFLOP_s=3 * flops / seconds / 1e9, train_matmul_pct=100 * share,
                   train_peak_MiB=peak_of(warm(train_step_fn(model, x, dtype)), device),
                   train_rounds=[f for f, _ in rounds], train_matmul_rounds=[m for _, m in rounds])
    return row


def benchmark_models(configs: dict, *, sizes: dict, batches, dtypes, layouts, checkpointing, compile, train,
                     device, iters, warmup, report) -> list[dict]:
    """Every combination; ``report(row)`` is called as each row is ready. Training is timed for every row when
    ``train`` is set or checkpointing is among the variants (to compare with). Peak memory is the eager model's."""
    train = train or True in checkpointing
    rows = []
    combinations = list(itertools.product(configs.items(), dtypes, layouts, batches, checkpointing))
    for (name, cfg), dtype, layout, batch, ckpt in tqdm(combinations, desc='dense benchmark', unit='row'):
        row = benchmark_one(name, cfg, size=sizes[name], batch=batch, dtype=dtype, device=device,
                            channels_last=layout == 'channels_last', checkpointing=ckpt, compile=compile,
                            train=train, iters=iters, warmup=warmup)
        rows.append(row)
        report(row)
    return rows


def resolution_sweep(cfg, sizes: list[int], *, device: str, dtype: str, iters: int, report) -> list[dict]:
    """Batch-1 inference of ``cfg.model`` at each square size, attention through SDPA and the explicit path:
    seconds and peak memory of the whole model, and peak memory of its backbone alone (where attention's
    share shows: at batch 1 the whole model's peak is the head's full-size logits)."""
    device = torch.device(device)
    model = build_model(cfg, device).eval()
    rows = []
    for size in tqdm(sizes, desc='resolution sweep', unit='size'):
        x = torch.randn(1, 3, size, size, device=device)
        for fused in (True, False):
            set_fused_attention(model, fused)
            run = forward_fn(model, x, dtype)
            times = round_seconds(run, device, iters, warmup=1)
            row = {'size': size, 'tokens': (size // 16) ** 2, 'attention': 'sdpa' if fused else 'explicit',
                   'dtype': dtype, 'seconds': median(times), 'peak_MiB': peak_of(run, device),
                   'backbone_peak_MiB': peak_of(backbone_fn(model, x, dtype), device), 'rounds': times}
            rows.append(row)
            report(row)
    set_fused_attention(model, True)
    return rows


def backbone_fn(model, x, dtype: str):
    def run():
        with torch.inference_mode(), autocast(x.device, dtype):
            model.backbone(x)
    return run


def plot_sweep(rows: list[dict], out) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    keys = ('seconds', 'backbone_peak_MiB', 'peak_MiB')
    for attention, style in (('sdpa', 'o-'), ('explicit', 's--')):
        part = [r for r in rows if r['attention'] == attention]
        tokens = [r['tokens'] for r in part]
        for ax, key in zip(axes, keys):
            ax.plot(tokens, [r[key] for r in part], style, label=attention)
    labels = ('forward seconds (batch 1)', 'backbone peak memory (MiB)', 'whole-model peak memory (MiB)')
    for ax, label in zip(axes, labels):
        ax.set_xlabel('tokens per image ((size / 16)^2)')
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle('DPT inference against token count: SDPA (linear memory) vs explicit attention (quadratic)')
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
