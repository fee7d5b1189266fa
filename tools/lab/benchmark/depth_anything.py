"""Our Depth Anything V2 against transformers' ``DepthAnythingForDepthEstimation`` in the same process, on the same
weights (ours loads the reference's ``save_pretrained`` folder through ``heads.from_pretrained_hf`` and is routed as
the predictor routes it, ``zoo.runtime.apply_kernel_policy``): forward
seconds and peak memory, interleaved rounds (ours, reference, reference, ours, ...), ratios ours / reference."""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from heads.hf.folder import from_pretrained_hf
from zoo.runtime import apply_kernel_policy

from .reference import paired_cells

COLUMNS = ['model', 'batch', 'size', 'ours_s', 'hf_s', 'time_ratio', 'ours_peak_MiB', 'hf_peak_MiB', 'memory_ratio',
           'max_abs_diff']
#: transformers' configs of the released Depth Anything V2 models (Depth-Anything-V2-{Small,Base,Large}-hf)
SIZES = {'vits': (384, 6, [3, 6, 9, 12], [48, 96, 192, 384], 64),
         'vitb': (768, 12, [3, 6, 9, 12], [96, 192, 384, 768], 128),
         'vitl': (1024, 16, [5, 12, 18, 24], [256, 512, 1024, 1024], 256)}


def hf_depth_anything_pair(encoder: str, workdir: Path):
    """transformers' Depth Anything V2 ``encoder`` (random init, 518x518) and ours with its weights."""
    import transformers
    hidden, heads, stages, widths, fusion = SIZES[encoder]
    backbone = transformers.Dinov2Config(hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=stages[-1],
                                         image_size=518, patch_size=14, out_indices=stages,
                                         reshape_hidden_states=False)
    config = transformers.DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=hidden,
                                              neck_hidden_sizes=widths, fusion_hidden_size=fusion)
    ref = transformers.DepthAnythingForDepthEstimation(config).eval()
    ref.save_pretrained(workdir)
    return from_pretrained_hf(workdir), ref


def benchmark_depth_anything(encoder: str, batch: int, size: int, rounds: int, device: str,
                             report=lambda row: None, profile_runs: int = 0, report_profile=lambda text: None) -> dict:
    """One row: forward seconds (median over interleaved rounds), peak memory, and the largest output difference;
    with ``profile_runs`` the operator profiles side by side (:mod:`.op_profile`) to ``report_profile``."""
    with tempfile.TemporaryDirectory() as workdir:
        ours, ref = hf_depth_anything_pair(encoder, Path(workdir))
    ours, ref = ours.to(device), ref.to(device)
    apply_kernel_policy(ours)  # as the predictor does (tools/benchmark.py prints its choice)
    x = torch.randn(batch, 3, size, size, device=device)
    calls = [lambda: ours(x, mode='tensor'), lambda: ref(pixel_values=x).predicted_depth]
    with torch.inference_mode():
        outputs = [call() for call in calls]  # also the warm-up
        title = f"Depth Anything V2 {encoder}, forward, batch {batch}, {size}x{size}"
        cells, times = paired_cells(calls, x.device, rounds, profile_runs, title, report_profile)
    row = {'model': f'Depth Anything V2 {encoder}', 'batch': batch, 'size': size, **cells,
           'max_abs_diff': (outputs[0][:, 0] - outputs[1]).abs().max().item(), **times}
    report(row)
    return row
