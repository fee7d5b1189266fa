"""The acceptance run of a GPU machine (``tools/gpu_check.py``): one table of what the GPU path does.

Steps (each a row ``step | result | detail``; a failing step is reported and the others still run):
- ``train``: DPT ViT-B/16 training (forward + backward) img/s and peak memory at the size and batch given, under
  bf16 autocast on CUDA (fp32 on a CPU without bf16 units), with the model FLOPs it achieves (3x the forward's) as
  a share of the matmul rate measured in the same dtype on the same device;
- ``flash``: whether SDPA's flash kernel runs the model's attention: the forward under flash-only SDPA, its flash
  kernel calls counted (``yes`` only if every attention call ran it; a model whose attention bypasses SDPA is ``no``);
- ``inference``: forward img/s and its share of the matmul rate; ``inference_big``: batch-1 peak memory at the
  large size;
- ``compile``: forward img/s eager and under ``torch.compile`` (``skipped``, with the reason, under ``--no-compile``);
- ``ddp``: ``torchrun --nproc_per_node 1 tools/train.py ... --launcher pytorch`` for a few iterations (NCCL on
  CUDA, gloo on CPU) on the built-in quickstart scenes (no dataset needed);
- ``fsdp``: the same run with ``--strategy fsdp`` (one process per GPU; two gloo processes on CPU), the gathered
  parameters in bf16 (fp32 on a CPU without bf16 units), activation checkpointing on; with the per-process share
  of parameter + optimizer bytes it logs (1 / processes, plus padding);
- ``fp16``: the quickstart trained under fp16 autocast with dynamic loss scaling (``AutocastOptimWrapper``,
  ``dtype='float16'``): the final loss and weights finite, and the loss scale the run ended with;
- ``syncbn``: on CUDA, the DDP run with ``sync_bn='torch'`` (mmengine converts the DPT head's BatchNorm to
  SyncBatchNorm) under bf16 autocast; with one GPU no statistics cross GPUs, so it shows the conversion and the
  mixed-precision DDP path run, not the reduction. On CPU it is skipped (torch's SyncBatchNorm needs a GPU);
- ``deterministic``: two ``--deterministic`` runs of the quickstart, their final weights compared bit for bit.

Each step is its own row: a step that fails becomes a ``FAILED`` row with its error (the whole traceback goes to
stderr) and the others still run; ``progress`` is called with the rows so far after each step, so that a run cut
short by a time limit still leaves its table.

Without CUDA the same steps run tiny on the CPU (the quickstart's model at 64x96), which is what the test suite
runs; the table says which device it measured.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
from mmengine.config import Config

from .dense import benchmark_one, build_model, forward_fn, peak_of
from .tables import markdown

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / 'configs' / 'quickstart.py'
RUN_TIMEOUT = int(os.environ.get('GPU_CHECK_RUN_TIMEOUT', 900))  # seconds for one tools/train.py run


def plan(device: str) -> dict:
    """What the run measures on ``device``: the real sizes on CUDA, the tiny ones on CPU."""
    if device.startswith('cuda'):
        return dict(config=ROOT / 'configs' / 'dpt_vitb_ade20k.py', size=(512, 512), big=(1024, 1024), batch=8,
                    dtype='bf16', iters=10, warmup=3, train_iters=20, fsdp_nproc=torch.cuda.device_count())
    from zoo.runtime import cpu_has_bf16_kernels
    return dict(config=QUICKSTART, size=(64, 96), big=(128, 192), batch=2, dtype='bf16' if cpu_has_bf16_kernels()
                else 'fp32', iters=2, warmup=1, train_iters=2, fsdp_nproc=2)  # two processes: the sharding shows


def _row(step: str, result: str, detail: str = '', metrics: dict | None = None, rounds: dict | None = None) -> dict:
    """A table row; ``metrics`` (single values) and ``rounds`` (side -> every timed round's seconds) are what the
    step measured, for its record in the results store (tools/gpu_check.py)."""
    return {'step': step, 'result': result, 'detail': detail, **({'metrics': metrics} if metrics else {}),
            **({'rounds': rounds} if rounds else {})}


def throughput_steps(p: dict, device: str, compile: bool) -> list:
    """The in-process steps: (name, thunk returning rows). The model and its eager figures are shared through
    ``state``: the later steps need the eager row and the built model."""
    cfg = Config.fromfile(str(p['config']))
    common = dict(size=p['size'], batch=p['batch'], dtype=p['dtype'], device=device, channels_last=True,
                  checkpointing=False, iters=p['iters'], warmup=p['warmup'])
    size = f"{p['size'][0]}x{p['size'][1]}, batch {p['batch']}, {p['dtype']}"
    state = {}

    def throughput():
        row = state['row'] = benchmark_one('dpt', cfg, compile=False, train=True, **common)
        return [_row('train', f"{row['train_img_s']:.3g} img/s",
                     f"{size}; {3 * 2 * row['GMACs']:.3g} GFLOP per image: {row['train_GFLOP_s'] / 1e3:.3g} TFLOP/s "
                     f"= {row['train_matmul_pct']:.3g}% of the matmul rate measured in the same rounds "
                     f"({row['matmul_GFLOP_s'] / 1e3:.3g} TFLOP/s); peak {row['train_peak_MiB']:.0f} MiB",
                     {'img_s': row['train_img_s'], 'GFLOP_s': row['train_GFLOP_s'],
                      'matmul_pct': row['train_matmul_pct'], 'peak_MiB': row['train_peak_MiB']},
                     {'ours': row['train_rounds'], 'matmul': row['train_matmul_rounds']}),
                _row('inference', f"{row['fwd_img_s']:.3g} img/s", f"{size}; {2 * row['GMACs']:.3g} GFLOP per image: "
                                                                    f"{row['matmul_pct']:.3g}% of the matmul rate; "
                                                                    f"peak {row['fwd_peak_MiB']:.0f} MiB",
                     {'img_s': row['fwd_img_s'], 'GFLOP_s': row['GFLOP_s'], 'matmul_GFLOP_s': row['matmul_GFLOP_s'],
                      'matmul_pct': row['matmul_pct'], 'peak_MiB': row['fwd_peak_MiB']},
                     {'ours': row['fwd_rounds'], 'matmul': row['matmul_rounds']})]

    def flash():
        model = state['model'] = build_model(cfg, device).eval()
        return [flash_row(model, p, device)]

    def big():
        model = state.get('model') or build_model(cfg, device).eval()
        x = torch.randn(1, 3, *p['big'], device=device)
        peak = peak_of(forward_fn(model, x, p['dtype']), torch.device(device))
        return [_row('inference_big', f"{peak:.0f} MiB", f"batch 1 at {p['big'][0]}x{p['big'][1]}, {p['dtype']}",
                     {'peak_MiB': peak})]

    def compiled():
        if not compile:
            return [_row('compile', 'skipped', 'not run: --no-compile was given')]
        state.pop('model', None)
        eager = state.get('row') or benchmark_one('dpt', cfg, compile=False, train=False, **common)
        start = time.perf_counter()
        row = benchmark_one('dpt', cfg, compile=True, train=False, **common)
        seconds = time.perf_counter() - start
        return [_row('compile', f"{row['fwd_img_s'] / eager['fwd_img_s']:.2f}x eager",
                     f"forward {eager['fwd_img_s']:.3g} img/s eager, {row['fwd_img_s']:.3g} compiled "
                     f"({seconds:.0f} s with the compilation)",
                     {'speedup': row['fwd_img_s'] / eager['fwd_img_s'], 'img_s_eager': eager['fwd_img_s'],
                      'img_s': row['fwd_img_s'], 'wall_s': seconds},
                     {'ours': row['fwd_rounds'], 'eager': eager['fwd_rounds']})]

    return [('train', throughput), ('flash', flash), ('inference_big', big), ('compile', compiled)]


def attention_modules(model) -> int:
    """How many attention calls one forward makes: the backbone's attention modules (each runs once)."""
    from zoo.core.attention import Attention
    return sum(isinstance(m, Attention) for m in model.modules())


def flash_row(model, p: dict, device: str) -> dict:
    """``yes`` when every attention call of one forward under flash-only SDPA ran SDPA's flash kernel, counted by
    torch's profiler (``aten::_scaled_dot_product_flash_attention`` on CUDA, ``..._for_cpu`` on CPU)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(1, 3, *p['size'], device=device)
    expected = attention_modules(model)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), profile(activities=[ProfilerActivity.CPU]) as profiler:
            forward_fn(model, x, p['dtype'])()
    except RuntimeError as error:
        return _row('flash', 'no', str(error).splitlines()[0][:160])
    kernels = {e.key.removeprefix('aten::'): e.count for e in profiler.key_averages()
               if e.key.startswith('aten::_scaled_dot_product_')}
    flash = sum(n for name, n in kernels.items() if name.startswith('_scaled_dot_product_flash_attention'))
    detail = (f"{flash} of the model's {expected} attention calls ran SDPA's flash kernel "
              f"({', '.join(f'{k} x{n}' for k, n in sorted(kernels.items())) or 'no SDPA kernel ran'}; {p['dtype']})")
    return _row('flash', 'yes' if expected and flash == expected else 'no', detail,
                {'flash_calls': flash, 'attention_calls': expected})


def train_command(p: dict, work_dir: Path, *extra: str, nproc: int = 0, options=()) -> list[str]:
    launch = ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={nproc}'] if nproc else []
    iters = p['train_iters']
    return [sys.executable, *launch, str(ROOT / 'tools' / 'train.py'), str(QUICKSTART), '--work-dir', str(work_dir),
            *extra, '--cfg-options', f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}',
            f'default_hooks.checkpoint.interval={iters}', 'val_dataloader.dataset.num_samples=4', *options]


def run_command(command: list[str]) -> tuple[bool, str, float]:
    start = time.perf_counter()
    path = os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')])
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          env={**os.environ, 'PYTHONPATH': path})
    lines = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode:
        print('\n'.join(lines[-40:]), file=sys.stderr)  # the failing run's own traceback, for whoever reads the log
    return done.returncode == 0, (lines[-1:] or [''])[0][:160], time.perf_counter() - start


def training_steps(p: dict, device: str, tmp: Path) -> list:
    """The steps that run tools/train.py in child processes: (name, thunk returning rows)."""
    backend = 'NCCL' if device.startswith('cuda') else 'gloo'

    def ddp():
        ok, tail, seconds = run_command(train_command(p, tmp / 'ddp', '--launcher', 'pytorch', nproc=1))
        return [_row('ddp', 'ok' if ok else 'FAILED', f"1 process, {backend}, {p['train_iters']} iterations, "
                                                       f"{seconds:.0f} s" + ('' if ok else f': {tail}'),
                     {'wall_s': seconds} if ok else None)]

    def deterministic():
        finals = []
        for k in range(2):
            ok, tail, _ = run_command(train_command(p, tmp / f'det{k}', '--deterministic'))
            if not ok:
                return [_row('deterministic', 'FAILED', tail)]
            finals.append(final_state(p, tmp / f'det{k}')['state_dict'])
        differing = [k for k in finals[0] if not torch.equal(finals[0][k], finals[1][k])]
        return [_row('deterministic', 'equal' if not differing else f'{len(differing)} tensors differ',
                     f"two --deterministic runs of {p['train_iters']} iterations, {len(finals[0])} tensors "
                     f"compared bit for bit")]

    return [('ddp', ddp), ('fsdp', lambda: [fsdp_row(p, device, tmp / 'fsdp')]),
            ('fp16', lambda: [fp16_row(p, tmp / 'fp16')]), ('syncbn', lambda: [syncbn_row(p, device, tmp / 'sbn')]),
            ('deterministic', deterministic)]


def final_state(p: dict, work_dir: Path) -> dict:
    return torch.load(work_dir / f"iter_{p['train_iters']}.pth", map_location='cpu', weights_only=False)


def last_loss(work_dir: Path) -> float | None:
    logs = sorted(work_dir.glob('*/*.log'))
    found = re.findall(r'\bloss: ([-\d.e+]+|nan|inf)', logs[-1].read_text()) if logs else []
    return float(found[-1]) if found else None


def fp16_row(p: dict, work_dir: Path) -> dict:
    """The quickstart under fp16 autocast with dynamic loss scaling: finite loss and weights, the final scale."""
    ok, tail, seconds = run_command(train_command(p, work_dir, options=(
        'optim_wrapper.type=AutocastOptimWrapper', 'optim_wrapper.dtype=float16', 'default_hooks.logger.interval=1')))
    detail = f"1 process, fp16 autocast + GradScaler, {p['train_iters']} iterations, {seconds:.0f} s"
    if not ok:
        return _row('fp16', 'FAILED', f'{detail}: {tail}')
    state = final_state(p, work_dir)
    scale = state['optimizer'].get('loss_scaler', {}).get('scale')
    finite = all(torch.isfinite(v).all() for v in state['state_dict'].values() if v.is_floating_point())
    loss = last_loss(work_dir)
    good = finite and scale is not None and loss is not None and math.isfinite(loss)
    return _row('fp16', 'ok' if good else 'FAILED', f"{detail}; last logged loss {loss}, loss scale at the end "
                                                    f"{scale}, weights {'finite' if finite else 'NOT finite'}",
                {'wall_s': seconds, 'loss': loss, 'loss_scale': float(scale)} if good else None)


def syncbn_row(p: dict, device: str, work_dir: Path) -> dict:
    """DDP with ``sync_bn='torch'`` under bf16 autocast (CUDA only: torch's SyncBatchNorm needs a GPU)."""
    if not device.startswith('cuda'):
        return _row('syncbn', 'skipped', "torch's SyncBatchNorm needs CUDA")
    ok, tail, seconds = run_command(train_command(p, work_dir, '--launcher', 'pytorch', '--amp', nproc=1,
                                                  options=('sync_bn=torch', 'default_hooks.logger.interval=1')))
    detail = (f"1 process, NCCL, sync_bn='torch', bf16 autocast, {p['train_iters']} iterations, {seconds:.0f} s "
              f"(one GPU: no statistics cross GPUs)")
    if not ok:
        return _row('syncbn', 'FAILED', f'{detail}: {tail}')
    loss = last_loss(work_dir)
    good = loss is not None and math.isfinite(loss)
    return _row('syncbn', 'ok' if good else 'FAILED', f'{detail}; last logged loss {loss}',
                {'wall_s': seconds, 'loss': loss} if good else None)


def fsdp_row(p: dict, device: str, work_dir: Path) -> dict:
    """``torchrun ... --launcher pytorch --strategy fsdp`` on every GPU (two processes on CPU)."""
    nproc = p['fsdp_nproc']
    dtype = 'bfloat16' if p['dtype'] == 'bf16' else 'float32'
    ok, tail, seconds = run_command(train_command(
        p, work_dir, '--launcher', 'pytorch', '--strategy', 'fsdp', nproc=nproc,
        options=(f'model_wrapper_cfg.param_dtype={dtype}', 'model_wrapper_cfg.activation_checkpointing=True')))
    backend = 'NCCL' if device.startswith('cuda') else 'gloo'
    detail = f"{nproc} process(es), {backend}, {dtype} parameters, {p['train_iters']} iterations, {seconds:.0f} s"
    if not ok:
        return _row('fsdp', 'FAILED', f'{detail}: {tail}')
    logs = sorted(work_dir.glob('*/*.log'))
    found = re.search(r'ratio ([\d.]+)', logs[0].read_text()) if logs else None
    share = f"; rank 0 holds {float(found[1]):.3f} of the parameter + optimizer bytes" if found else ''
    return _row('fsdp', 'ok', detail + share,
                {'wall_s': seconds, **({'rank0_share': float(found[1])} if found else {})})


def gpu_check(device: str | None = None, compile: bool = True, progress=None) -> tuple[list[dict], str]:
    """(rows, header) of the acceptance run on ``device`` (default: CUDA if present, else the tiny CPU run);
    ``progress(rows, header)`` is called after each step."""
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    p = plan(device)
    name = torch.cuda.get_device_name(device) if device.startswith('cuda') else 'CPU (no CUDA device: the tiny run)'
    header = (f"gpu_check on {name}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}; model: "
              f"{Path(p['config']).name} at {p['size'][0]}x{p['size'][1]}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        steps = throughput_steps(p, device, compile)
        compiled = steps.pop()  # last: its compilation time is the least known
        for step, thunk in [*steps, *training_steps(p, device, Path(tmp)), compiled]:
            start = time.perf_counter()
            try:
                rows.extend(thunk())
            except Exception as error:  # a failing step is a row of the report, not the end of it
                traceback.print_exc()
                rows.append(_row(step, 'FAILED', f'{type(error).__name__}: {str(error).splitlines()[0][:160]}'))
            print(f'[gpu_check] {step}: {time.perf_counter() - start:.0f} s', file=sys.stderr, flush=True)
            if progress:
                progress(rows, header)
    return rows, header


def report(rows: list[dict], header: str) -> str:
    return markdown(rows, header, ['step', 'result', 'detail'])
