"""Depth of a video longer than a clip, by overlapping windows (Video Depth Anything's ``infer_video_depth``).

The frames 'n 3 H W' run in windows of ``length`` frames, each starting ``length - overlap`` frames after the last;
the video is padded with its last frame to whole windows. A window's first ``overlap`` frames are the previous
window's ``keyframes`` (the frames it saw: its first, one from its middle, its last ones), so that its depth is
predicted in the context of the previous window. Each window's depth 'length H W' is then aligned to the video so far:

- relative models: the scale and shift taking its first ``overlap - interp`` frames' depth (the previous window's
  first key frames, seen again) to their aligned depth, by least squares over every pixel; metric models: none;
- its frames ``overlap - interp`` .. ``overlap`` (re-predictions of the previous window's last ``interp`` frames)
  blend into those linearly (weights 0 .. 1), the rest are appended; depths are clipped at 0.

:class:`VideoWindows` holds the settings (the released models': 32, 10, (0, 12, 24 .. 31), 8) and
:func:`video_depth` runs them with a model's clip prediction.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class VideoWindows:
    """``length`` frames a window, the first ``overlap`` the previous window's ``keyframes``, the last ``interp``
    frames of the overlap blended (module docstring)."""
    length: int = 32
    overlap: int = 10
    keyframes: tuple[int, ...] = (0, 12, 24, 25, 26, 27, 28, 29, 30, 31)
    interp: int = 8

    def __post_init__(self):
        if not 0 < self.overlap < self.length or len(self.keyframes) != self.overlap or \
                any(not 0 <= k < self.length for k in self.keyframes) or not 1 < self.interp < self.overlap:
            raise ValueError(f"video windows: {self.overlap} key frames (overlap) below the window length "
                             f"{self.length}, each a frame of the window, and 1 < interp < overlap; got {self}")


def scale_and_shift(prediction: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """Least-squares (s, t) minimising |s prediction + t - target|^2 over every element; (1, 0) when singular."""
    p, y = prediction.double().flatten(), target.double().flatten()
    a00, a01, a11 = (p * p).sum(), p.sum(), float(p.numel())
    b0, b1 = (p * y).sum(), y.sum()
    det = a00 * a11 - a01 * a01
    if det == 0:
        return 1.0, 0.0
    return float((a11 * b0 - a01 * b1) / det), float((-a01 * b0 + a00 * b1) / det)


def video_depth(predict: Callable[[torch.Tensor], torch.Tensor], frames: torch.Tensor, metric: bool = False,
                windows: VideoWindows = VideoWindows()) -> torch.Tensor:
    """Depth 'n H W' of the frames 'n 3 H W' (module docstring); ``predict``: a window 't 3 H W' -> 't H W'."""
    n, length, overlap = frames.shape[0], windows.length, windows.overlap
    step = length - overlap
    frames = torch.cat([frames, frames[-1:].expand((step - n % step) % step + overlap, -1, -1, -1)])
    depths, previous = [], None
    for start in range(0, n, step):
        window = frames[start:start + length].clone()
        if previous is not None:
            window[:overlap] = previous[list(windows.keyframes)]
        depths.append(predict(window))
        previous = window
    kept = overlap - windows.interp  # the first key frames, seen again: what the scale and shift are fitted on
    aligned, reference = list(depths[0]), [depths[0][k] for k in windows.keyframes[:kept]]
    weights = torch.linspace(0, 1, windows.interp)
    for depth in depths[1:]:
        scale, shift = (1.0, 0.0) if metric else scale_and_shift(depth[:kept], torch.stack(reference))
        depth = (depth * scale + shift).clamp(min=0)
        blended = [a * (1 - w) + b * w for a, b, w in zip(aligned[-windows.interp:], depth[kept:overlap], weights)]
        aligned[-windows.interp:] = blended
        aligned += list(depth[overlap:])
        reference = reference[:1] + [depth[k] for k in windows.keyframes[1:kept]]
    return torch.stack(aligned[:n])
