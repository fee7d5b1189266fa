"""MoGe-2's image geometry (microsoft/MoGe): the token grid an image is resized to, and the normalised view-plane UV
of a map's pixel centres (the neck's extra input at every level; the target of the focal and shift fit)."""
from __future__ import annotations

import math

import torch


def token_grid(num_tokens: int, height: int, width: int) -> tuple[int, int]:
    """The authors' token grid 'h w' for an image of 'height width': about ``num_tokens`` patches at its aspect."""
    aspect = width / height
    return round((num_tokens / aspect) ** 0.5), round((num_tokens * aspect) ** 0.5)


def view_plane_uv(height: int, width: int, aspect: float, dtype=None, device=None) -> torch.Tensor:
    """The normalised view-plane UV '2 height width' of pixel centres: the image spans +-aspect/diag in u and
    +-1/diag in v (diag = sqrt(1 + aspect^2))."""
    diag = math.sqrt(1 + aspect ** 2)
    su, sv = aspect / diag * (width - 1) / width, 1 / diag * (height - 1) / height
    u = torch.linspace(-su, su, width, dtype=dtype, device=device)
    v = torch.linspace(-sv, sv, height, dtype=dtype, device=device)
    return torch.stack([u[None, :].expand(height, width), v[:, None].expand(height, width)])
