"""Zoo models against their reference implementations in the same process, on the same weights.

- :func:`benchmark`: a classifier against timm's model of the same name (transformers' for CvT): forward img/s per
  dtype, the ratio of their times, peak memory;
- :func:`benchmark_dpt`: our DPT ViT-B/16 segmentation model against transformers' DPTForSemanticSegmentation, forward
  and forward + backward, with activation checkpointing as an option.

Runs are interleaved (ours, reference, reference, ours, ...) so that drift on a busy machine hits both alike; a ratio
is the median over rounds of the paired ratio.
"""
from __future__ import annotations

import contextlib
import tempfile
from functools import partial
from pathlib import Path

import torch

import zoo
from heads.hf.folder import from_pretrained_hf
from zoo.core import set_grad_checkpointing
from zoo.profiling import count_macs, count_params, interleaved_rounds, median, peak_memory, seconds_of, time_forward
from zoo.runtime import apply_kernel_policy

from .dense import DTYPES
from .op_profile import op_profile, profile_table

COLUMNS = ['model', 'dtype', 'batch', 'size', 'params_M', 'GMACs', 'ours_img_s', 'ref_img_s', 'ratio',
           'ours_peak_MiB', 'ref_peak_MiB']
DPT_COLUMNS = ['pass', 'batch', 'size', 'ours_s', 'hf_s', 'time_ratio', 'ours_peak_MiB', 'hf_peak_MiB',
               'memory_ratio']


def hf_cvt_reference(name: str):
    """transformers' CvtForImageClassification with the sizes of our ``name`` (random init), or None."""
    try:
        import transformers
    except ImportError:
        return None
    from zoo.registry import get_variant
    kwargs = get_variant(name).kwargs
    config = transformers.CvtConfig(embed_dim=list(kwargs['embed_dims']), num_heads=list(kwargs['num_heads']),
                                    depth=list(kwargs['depths']), num_labels=1000)
    return transformers.CvtForImageClassification(config)


def reference_model(name: str):
    """The reference of ``name`` (random init): transformers for CvT, else the timm model of the same name;
    None when the reference library lacks it or is not installed."""
    if name.startswith('cvt_'):
        return hf_cvt_reference(name)
    try:
        import timm
    except ImportError:
        return None
    return timm.create_model(name, pretrained=False) if name in timm.list_models() else None


def interleaved_times(models: list, x: torch.Tensor, amp_dtype, warmup: int, iters: int) -> list[list[float]]:
    """Forward seconds of each model per round, after ``warmup`` untimed passes each."""
    for model in models:
        time_forward(model, x, amp_dtype=amp_dtype, warmup=warmup, iters=1)
    return interleaved_rounds([partial(time_forward, m, x, amp_dtype=amp_dtype, warmup=0, iters=1) for m in models],
                              iters)


def measure_peak(model, x, amp_dtype) -> float:
    autocast = torch.autocast(x.device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
    with torch.inference_mode(), autocast, peak_memory(x.device) as mem:
        model(x)
    return mem['peak_mib']


def benchmark(name: str, batch: int, size: int, dtypes: list[str], device: str, warmup: int, iters: int,
              report=lambda row: None, profile_runs: int = 0, report_profile=lambda text: None) -> list[dict]:
    """Our classifier ``name`` against its reference with the same weights: img/s, their ratio, peak memory; one
    row per dtype, each given to ``report`` when ready; with ``profile_runs`` the fp32 forwards' operator
    profiles side by side (:mod:`.op_profile`) to ``report_profile``."""
    ours = zoo.create_classifier(name).eval().to(device)
    apply_kernel_policy(ours)  # as the runner does
    ref = reference_model(name)
    if ref is not None:
        zoo.load_pretrained(ours, ref.state_dict())
        ref = ref.eval().to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    gmacs = count_macs(ours, x[:1]) / 1e9
    rows = []
    for dtype in dtypes:
        models = [ours] + ([ref] if ref is not None else [])
        times = interleaved_times(models, x, DTYPES[dtype], warmup, iters)
        row = {'model': name, 'dtype': dtype, 'batch': batch, 'size': size, 'params_M': count_params(ours) / 1e6,
               'GMACs': gmacs, 'ours_img_s': batch / median(times[0]),
               'ours_peak_MiB': measure_peak(ours, x, DTYPES[dtype]), 'ours_rounds': times[0]}
        if ref is not None:  # ratio: median over rounds of the paired ratio, so that slow spells cancel
            row.update(ref_img_s=batch / median(times[1]),
                       ratio=median([r / o for o, r in zip(times[0], times[1])]),
                       ref_peak_MiB=measure_peak(ref, x, DTYPES[dtype]), ref_rounds=times[1])
        rows.append(row)
        report(row)
    if profile_runs and ref is not None:
        with torch.inference_mode():
            profiles = op_profile([lambda: ours(x), lambda: ref(x)], profile_runs)
        report_profile(f"{name}, fp32 forward, batch {batch}, {size}x{size}, self CPU time per run "
                       f"({profile_runs} runs each):\n" + profile_table(*profiles, names=('ours', 'reference')))
    return rows


def hf_dpt_pair(size: int, num_classes: int, workdir: Path):
    """transformers' DPTForSemanticSegmentation (ViT-B/16, mmseg/HF defaults) and ours with its weights."""
    import transformers
    config = transformers.DPTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                    intermediate_size=3072, image_size=size, patch_size=16,
                                    backbone_out_indices=[2, 5, 8, 11], neck_hidden_sizes=[96, 192, 384, 768],
                                    fusion_hidden_size=256, num_labels=num_classes, readout_type='project')
    ref = transformers.DPTForSemanticSegmentation(config)
    ref.save_pretrained(workdir)
    return from_pretrained_hf(workdir), ref


def train_step(model, x, is_ref: bool, optimizer=None) -> None:
    """Forward + backward of the segmentation logits (dropout active, as in training), then the optimizer's step
    if one is given."""
    model.train()
    logits = model(pixel_values=x).logits if is_ref else model(x, mode='tensor')
    logits.float().mean().backward()
    if optimizer is not None:
        optimizer.step()
    model.zero_grad(set_to_none=True)


def fused_adamw(model) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)


def benchmark_dpt(batch: int, size: int, rounds: int, device: str, checkpointing: bool,
                  report=lambda row: None, profile_runs: int = 0, report_profile=lambda text: None) -> list[dict]:
    """Our DPT against transformers' with the same weights (ours routed as the runner routes it,
    ``zoo.runtime.apply_kernel_policy``): forward and training-step (forward, backward, fused
    AdamW) seconds and peak memory, their ratios; with ``checkpointing`` also ours with activation checkpointing;
    with ``profile_runs`` each pass's operator profiles side by side (:mod:`.op_profile`) to ``report_profile``."""
    with tempfile.TemporaryDirectory() as workdir:
        ours, ref = hf_dpt_pair(size, 150, Path(workdir))
    ours, ref = ours.to(device), ref.to(device)
    apply_kernel_policy(ours)  # as the runner does (tools/benchmark.py prints its choice)
    x = torch.randn(batch, 3, size, size, device=device)
    infer = [lambda: ours.eval()(x, mode='tensor'), lambda: ref.eval()(pixel_values=x)]
    optimizers = fused_adamw(ours), fused_adamw(ref)
    train = [lambda: train_step(ours, x, False, optimizers[0]), lambda: train_step(ref, x, True, optimizers[1])]
    rows = []
    for label, calls, grad in (('forward', infer, False), ('training step (fused AdamW)', train, True)):
        with torch.set_grad_enabled(grad):
            for call in calls:  # warm-up
                call()
            title = f"DPT {label}, batch {batch}, {size}x{size}"
            cells, times = paired_cells(calls, x.device, rounds, profile_runs, title, report_profile)
        rows.append({'pass': label, 'batch': batch, 'size': size, **cells, **times})
        report(rows[-1])
    if checkpointing:
        set_grad_checkpointing(ours.backbone)
        with peak_memory(x.device) as mem:
            seconds = seconds_of(lambda: train_step(ours, x, False, optimizers[0]), x.device)
        reference_peak = rows[-1]['hf_peak_MiB']  # the training step's
        rows.append({'pass': 'training step, activation checkpointing', 'batch': batch, 'size': size,
                     'ours_s': seconds, 'ours_peak_MiB': mem['peak_mib'],
                     'memory_ratio': mem['peak_mib'] / reference_peak, 'ours_rounds': [seconds]})
        report(rows[-1])
    return rows


def paired_cells(calls, device, rounds: int, profile_runs: int = 0, title: str = '',
                 report_profile=lambda text: None) -> tuple[dict, dict]:
    """Ours against the reference, ``calls`` = [ours, reference] (warmed up): seconds (median over interleaved
    rounds), peak memory and their ratios; the rounds (``ours_rounds``, ``hf_rounds``) apart. With ``profile_runs``
    the operator profiles side by side (:mod:`.op_profile`) to ``report_profile``, headed by ``title``."""
    times = interleaved_rounds([partial(seconds_of, call, device) for call in calls], rounds)
    peaks = peaks_of(calls, device)
    if profile_runs:
        report_profile(f"{title}, self CPU time per run ({profile_runs} runs each):\n" +
                       profile_table(*op_profile(calls, profile_runs), names=('ours', 'transformers')))
    cells = {'ours_s': median(times[0]), 'hf_s': median(times[1]),
             'time_ratio': median([o / r for o, r in zip(*times)]),
             'ours_peak_MiB': peaks[0], 'hf_peak_MiB': peaks[1], 'memory_ratio': peaks[0] / peaks[1]}
    return cells, {'ours_rounds': times[0], 'hf_rounds': times[1]}


def peaks_of(calls, device) -> list[float]:
    """Peak memory (MiB) of one run of each call, in order."""
    peaks = []
    for call in calls:
        with peak_memory(device) as mem:
            call()
        peaks.append(mem['peak_mib'])
    return peaks
