"""``F.interpolate`` that stays deterministic where CUDA's resize backward is not.

CUDA's backward of bilinear and bicubic upsampling accumulates with atomics, so under
``torch.use_deterministic_algorithms(True)`` it raises (mmseg users meet this as a crash of deterministic
training). These modes are separable and linear in the input, so the same result is two matrix products,
``out = A_h x A_w^T``, whose backward is deterministic. The 1-D matrices are made by resampling an identity
with ``F.interpolate`` itself, so they carry its exact weights (align_corners, antialias, border clamping).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SEPARABLE_MODES = ('bilinear', 'bicubic')
#: Devices whose bilinear/bicubic backward is not deterministic (atomics): resized by matrix products there when
#: deterministic algorithms are on.
NONDETERMINISTIC_BACKWARD = {'cuda'}


def uses_matrix_path(x: torch.Tensor, mode: str) -> bool:
    """Whether :func:`interpolate` resizes ``x`` by matrix products: deterministic algorithms are on, the mode is
    separable, and ``x`` is on a device of :data:`NONDETERMINISTIC_BACKWARD`."""
    return (x.device.type in NONDETERMINISTIC_BACKWARD and mode in SEPARABLE_MODES
            and torch.are_deterministic_algorithms_enabled())


def interpolate(x: torch.Tensor, size=None, scale_factor=None, mode: str = 'nearest', align_corners=None,
                antialias: bool = False) -> torch.Tensor:
    """``F.interpolate(x, ...)`` for 'b c h w' tensors; on CUDA under deterministic algorithms, bilinear and
    bicubic run as :func:`matrix_interpolate` (:func:`uses_matrix_path`)."""
    args = dict(size=size, scale_factor=scale_factor, mode=mode, align_corners=align_corners, antialias=antialias)
    if uses_matrix_path(x, mode):
        return matrix_interpolate(x, **args)
    return F.interpolate(x, **args)


class Upsample(nn.Module):
    """``nn.Upsample`` through :func:`interpolate`, so that a deterministic run on CUDA does not fail in backward
    (the module to use in heads and necks instead of ``nn.Upsample``)."""

    def __init__(self, scale_factor: float = 2.0, mode: str = 'bilinear', align_corners: bool | None = None):
        super().__init__()
        self.scale_factor, self.mode, self.align_corners = scale_factor, mode, align_corners

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return interpolate(x, scale_factor=self.scale_factor, mode=self.mode, align_corners=self.align_corners)

    def extra_repr(self) -> str:
        return f"scale_factor={self.scale_factor}, mode={self.mode!r}, align_corners={self.align_corners}"


def resize_matrix(n: int, size, scale_factor, dtype, device, **args) -> torch.Tensor:
    """The 'm n' matrix that resamples a length-n axis as ``F.interpolate`` does (``size``/``scale_factor``
    for that axis, same mode/align_corners/antialias)."""
    eye = torch.eye(n, dtype=dtype, device=device)[None, None]  # '1 1 n n': column j an impulse at j
    with torch.no_grad():  # the width axis n -> n is left as it is
        out = F.interpolate(eye, size=None if size is None else (size, n),
                            scale_factor=None if scale_factor is None else (scale_factor, 1.0), **args)
    return out[0, 0]  # (m, n): output position x input position


def matrix_interpolate(x: torch.Tensor, size=None, scale_factor=None, mode: str = 'bilinear', align_corners=None,
                       antialias: bool = False) -> torch.Tensor:
    """Separable resize of 'b c h w' as two matrix products (see the module docstring)."""
    if mode not in SEPARABLE_MODES:
        raise ValueError(f"matrix_interpolate handles {SEPARABLE_MODES}, not {mode!r}")
    pairs = lambda v: (None, None) if v is None else (tuple(v) if isinstance(v, (tuple, list)) else (v, v))  # noqa: E731
    (size_h, size_w), (scale_h, scale_w) = pairs(size), pairs(scale_factor)
    args = dict(mode=mode, align_corners=align_corners, antialias=antialias, dtype=x.dtype, device=x.device)
    rows = resize_matrix(x.shape[-2], size_h, scale_h, **args)  # H h
    cols = resize_matrix(x.shape[-1], size_w, scale_w, **args)  # W w
    return torch.einsum('Hh,bchw,Ww->bcHW', rows, x, cols)
