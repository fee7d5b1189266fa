"""The size rule and normalisation of a feature export.

Size rule: the image is resized (bilinear, ``cv2.INTER_LINEAR``, as mmdet/mmseg resize) so that its short side
is ``short_side``, the aspect ratio kept; then each side is rounded to the nearest multiple of the model's
coarsest stride (at least one multiple), so that every level's map covers the input exactly
(``h_level = input_height / stride``). This changes the aspect ratio by at most half a stride per side; the
index stores both the original and the input size, so a box ``(x, y)`` in the image is at
``(x * input_width / width / stride, y * input_height / height / stride)`` on a level.
Normalisation: RGB / 255, then ``(x - mean) / std`` with the backbone's ``pretrained_cfg`` mean and std.
"""
from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from zoo.contract import Backbone

from ..io.images import check_rgb


def size_multiple(model: Backbone) -> int:
    """The least common multiple of the backbone's input multiple and every stride it gives a map at (a pyramid's
    max-pooled level too), so that each stored map is exactly input size / stride."""
    return math.lcm(model.input_multiple, *model.out_strides)


def input_size(height: int, width: int, short_side: int, multiple: int) -> tuple[int, int]:
    """(input height, input width): short side scaled to ``short_side``, sides rounded to ``multiple``."""
    if height < 1 or width < 1:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    scale = short_side / min(height, width)
    return tuple(max(multiple, int(round(side * scale / multiple)) * multiple) for side in (height, width))


def preprocess(image: np.ndarray, size: tuple[int, int], mean, std) -> torch.Tensor:
    """'1 3 h w' float32 network input from an 'H W 3' uint8 RGB ``image`` resized to ``size`` = (h, w)."""
    check_rgb(image)
    h, w = size
    if image.shape[:2] != (h, w):
        image = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div_(255)
    mean = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
    std = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)
    return ((x - mean) / std).unsqueeze(0)
