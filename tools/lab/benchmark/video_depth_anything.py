"""Our Video Depth Anything against the authors' own ``VideoDepthAnything`` (DepthAnything/Video-Depth-Anything, a
clone named on the command line: never a package of ours) in the same process, on the same weights (ours loads
their state dict through the ``'Video Depth Anything'`` layout): one clip's forward seconds and peak memory,
interleaved rounds (ours, theirs, theirs, ours, ...), ratios ours / theirs."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from heads.models.task_checkpoint import load_task_checkpoint
from heads.models.video_depth_anything import video_depth_anything_config
from heads.registry import MODELS
from zoo.runtime import apply_kernel_policy

from .reference import paired_cells

COLUMNS = ['model', 'frames', 'size', 'ours_s', 'authors_s', 'time_ratio', 'ours_peak_MiB', 'authors_peak_MiB',
           'memory_ratio', 'max_abs_diff']
#: their run.py's model_configs
SIZES = {'vits': (64, [48, 96, 192, 384]), 'vitb': (128, [96, 192, 384, 768]), 'vitl': (256, [256, 512, 1024, 1024])}


def authors_pair(encoder: str, frames: int, repo: Path):
    """Their model ``encoder`` (random weights) from the clone ``repo``, and ours with its weights."""
    if not (repo / 'video_depth_anything' / 'video_depth.py').is_file():
        raise FileNotFoundError(f"{repo}: not a clone of DepthAnything/Video-Depth-Anything (no "
                                f"video_depth_anything/video_depth.py); give the folder git clone made")
    sys.path.insert(0, str(repo))
    try:
        from video_depth_anything.video_depth import VideoDepthAnything
    except ImportError as err:
        raise ImportError(f"the authors' code in {repo} needs {err.name}: pip install {err.name}") from err
    features, widths = SIZES[encoder]
    theirs = VideoDepthAnything(encoder=encoder, features=features, out_channels=widths).eval()
    ours = MODELS.build(video_depth_anything_config(encoder, frames=frames)).eval()
    load_task_checkpoint(ours, theirs.state_dict())
    return ours, theirs


def benchmark_video_depth_anything(encoder: str, frames: int, size: int, rounds: int, repo: Path,
                                   report=lambda row: None) -> dict:
    """One row: a clip's forward seconds (median over interleaved rounds), peak memory, largest difference."""
    ours, theirs = authors_pair(encoder, frames, repo)
    apply_kernel_policy(ours)  # as the predictor does
    clip = torch.randn(1, frames, 3, size, size)
    calls = [lambda: ours.predict_clips(clip), lambda: theirs(clip)]
    with torch.inference_mode():
        outputs = [call() for call in calls]  # also the warm-up
        cells, times = paired_cells(calls, clip.device, rounds)
    row = {'model': f'Video Depth Anything {encoder}', 'frames': frames, 'size': size,
           'ours_s': cells['ours_s'], 'authors_s': cells['hf_s'], 'time_ratio': cells['time_ratio'],
           'ours_peak_MiB': cells['ours_peak_MiB'], 'authors_peak_MiB': cells['hf_peak_MiB'],
           'memory_ratio': cells['memory_ratio'], 'max_abs_diff': (outputs[0] - outputs[1]).abs().max().item(),
           'ours_rounds': times['ours_rounds'], 'authors_rounds': times['hf_rounds']}
    report(row)
    return row
