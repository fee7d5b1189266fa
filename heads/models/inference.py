"""Test-time inference strategies shared by the task models: whole image, sliding window, flip."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

Predict = Callable[[torch.Tensor], torch.Tensor]  # 'b c h w' -> 'b k h w' at the input size


def window_starts(size: int, crop: int, stride: int) -> list[int]:
    """Window origins covering [0, size): a window every ``stride``, the last one flush with the end."""
    if size <= crop:
        return [0]
    count = -(-(size - crop) // stride) + 1
    return sorted({min(i * stride, size - crop) for i in range(count)})


def predict_window(predict: Predict, x: torch.Tensor, top: int, left: int, crop: tuple[int, int]) -> torch.Tensor:
    """``predict`` on the ``crop``-sized window of ``x`` at (top, left): 'b k h w', the window's part of the image
    (a window running past the image is zero-padded to ``crop`` for the forward pass and its output cut back)."""
    window = x[..., top:top + crop[0], left:left + crop[1]]
    h, w = window.shape[-2:]
    padded = F.pad(window, (0, max(crop[1] - w, 0), 0, max(crop[0] - h, 0)))
    return predict(padded)[..., :h, :w]


def slide_inference(predict: Predict, x: torch.Tensor, crop: tuple[int, int], stride: tuple[int, int]) -> torch.Tensor:
    """Average of ``predict`` over overlapping crops of ``x``.

    An image smaller than the crop (in either direction) is padded to the crop for the forward pass and its
    prediction cut back, so any image works.
    """
    height, width = x.shape[-2:]
    total, count = None, x.new_zeros(1, 1, height, width)
    for top in window_starts(height, crop[0], stride[0]):
        for left in window_starts(width, crop[1], stride[1]):
            out = predict_window(predict, x, top, left, crop)
            h, w = out.shape[-2:]
            if total is None:
                total = x.new_zeros(x.shape[0], out.shape[1], height, width, dtype=out.dtype)
            total[..., top:top + h, left:left + w] += out
            count[..., top:top + h, left:left + w] += 1
    return total / count


def flip_average(infer: Predict, x: torch.Tensor) -> torch.Tensor:
    """Mean of the prediction and the mirrored prediction of the mirrored image."""
    return (infer(x) + infer(x.flip(-1)).flip(-1)) / 2
