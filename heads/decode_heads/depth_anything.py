"""Depth Anything's depth head (V1 and V2): conv -> bilinear to the patch grid's pixel size -> conv, ReLU -> conv,
then ReLU (relative) or sigmoid (metric), times ``max_depth``."""
from __future__ import annotations

from fractions import Fraction

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core import activate
from zoo.core.resize import interpolate

from ..registry import MODELS

STRIP_ROWS = 64


def upsampled_side(side, factor: float):
    """``round(side * factor)``; for a symbolic side (torch.export tracing a dynamic size) in integer arithmetic
    from ``factor`` as a fraction n / d, (2 side n + d) // 2d (halves rounded up; Python's round() of a symbolic
    float would fix the traced size), the same wherever side * factor is no half-integer (the 8x-grid map of the
    patch-14 models: always an integer)."""
    if isinstance(side, int):
        return round(side * factor)
    fraction = Fraction(factor).limit_denominator(1000)
    if float(fraction) != factor:
        raise ValueError(f"the depth head's upsample factor {factor} is no fraction with a denominator up to 1000: "
                         f"its output size cannot be computed in the exported graph; use such a factor")
    return (2 * side * fraction.numerator + fraction.denominator) // (2 * fraction.denominator)


def row_strips(height: int, rows: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of ``rows`` rows covering 0 .. height."""
    return [(start, min(start + rows, height)) for start in range(0, height, rows)]


@MODELS.register_module()
class DepthAnythingHead(nn.Module):
    """'b c h w -> b 1 (h u) (w u)' with u = ``upsample`` (patch size / 8 = 1.75 for the patch-14 models: the
    finest fused map is 8x the patch grid, the output the grid's pixel size, as the reference's
    ``patch_h * 14``).

    mode 'relative': ReLU x ``max_depth`` (1 in the released relative models): relative inverse depth (disparity);
    mode 'metric':   sigmoid x ``max_depth`` (20 indoors, 80 outdoors): depth in metres.
    ``output``: the last activation, when not the mode's: 'relu' for metric models that end in a ReLU (Video Depth
    Anything's metric models: metres, ``max_depth`` 1).
    Keys as transformers' (``conv1``, ``conv2``, ``conv3``); runs in float32 even under autocast.
    """

    def __init__(self, in_channels: int = 64, hidden_channels: int = 32, mode: str = 'relative',
                 max_depth: float = 1.0, upsample: float = 1.75, output: str | None = None):
        super().__init__()
        if mode not in ('relative', 'metric'):
            raise ValueError(f"depth head mode must be 'relative' or 'metric', got {mode!r}")
        if output not in (None, 'relu', 'sigmoid'):
            raise ValueError(f"depth head output must be None (the mode's), 'relu' or 'sigmoid', got {output!r}")
        self.mode, self.max_depth, self.upsample = mode, max_depth, upsample
        self.output = output or ('relu' if mode == 'relative' else 'sigmoid')
        self.conv1 = nn.Conv2d(in_channels, in_channels // 2, 3, padding=1)
        self.conv2 = nn.Conv2d(in_channels // 2, hidden_channels, 3, padding=1)
        self.conv3 = nn.Conv2d(hidden_channels, 1, 1)
        self.act = nn.ReLU()

    def conv2_rows(self, x: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """conv2's output rows start .. stop: 'b c h w -> b c (stop - start) w', the same numbers as those rows of
        ``conv2(x)`` (its 3x3 window reads one row either side; zero rows beyond the image)."""
        halo = x[..., max(start - 1, 0):min(stop + 1, x.shape[-2]), :]
        halo = F.pad(halo, (0, 0, int(start == 0), int(stop == x.shape[-2])))
        return F.conv2d(halo, self.conv2.weight, self.conv2.bias, padding=(0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = self.conv1(x.float())
            size = [upsampled_side(side, self.upsample) for side in x.shape[-2:]]
            x = interpolate(x, size=size, mode='bilinear', align_corners=True)
            if (torch.is_grad_enabled() and x.requires_grad) or torch.compiler.is_compiling():  # traced: one graph
                x = self.conv2(x)  # rebinding x frees the upsampled map before the ReLU
                x = self.conv3(activate(self.act, x))
            else:  # the full-size hidden map exists a strip of rows at a time: ~0.6x the peak memory
                x = torch.cat([self.conv3(activate(self.act, self.conv2_rows(x, start, stop)))
                               for start, stop in row_strips(x.shape[-2], STRIP_ROWS)], dim=-2)
            return (F.relu(x) if self.output == 'relu' else torch.sigmoid(x)) * self.max_depth
