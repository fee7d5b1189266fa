"""MoGe-2's heads (Wang et al. 2025, microsoft/MoGe ``moge.model.v2``): dense :class:`~heads.necks.ConvStack` heads on
the neck's levels (points, optionally normal and mask; each read at its last, finest level) and an MLP from the
backbone's CLS token to the log metric scale. Outputs, as the authors' ``MoGeModel.forward`` returns them, at the
image's size 'H W' (bilinear, no antialias):

- ``points`` 'b H W 3': the affine-invariant point map (x right, y down, z forward; up to scale and z shift),
  remapped by ``remap_output`` ('exp': x y times exp z, z exp z; 'linear', 'sinh', 'sinh_exp')
- ``normal`` 'b H W 3': unit normals (camera frame)
- ``mask`` 'b H W': probability that the pixel is valid (not sky or undefined), in (0, 1)
- ``metric_scale`` 'b': the factor from the point map to metres (exp of the MLP's output)
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..necks.conv_stack import ConvStack
from ..registry import MODELS

REMAPS = ('linear', 'sinh', 'exp', 'sinh_exp')


def mlp(dims: Sequence[int]) -> nn.Sequential:
    """Linear layers through ``dims`` with a ReLU between each ('b dims[0] -> b dims[-1]')."""
    layers = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(dims) - 2:
            layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


def remap_points(points: torch.Tensor, remap: str) -> torch.Tensor:
    """The heads' raw 'b h w 3' -> points (module docstring)."""
    if remap == 'linear':
        return points
    if remap == 'sinh':
        return torch.sinh(points)
    xy, z = points.split([2, 1], dim=-1)
    if remap == 'exp':
        z = torch.exp(z)
        return torch.cat([xy * z, z], dim=-1)
    if remap == 'sinh_exp':
        return torch.cat([torch.sinh(xy), torch.exp(z)], dim=-1)
    raise ValueError(f"unknown remap_output {remap!r}; choose one of {', '.join(REMAPS)}")


@MODELS.register_module()
class MoGeHead(nn.Module):
    """MoGe-2's heads: ConvStack configs ``points``, ``normal``, ``mask`` (None: no such output) and the scale MLP's
    ``scale_dims`` (None: no metric scale). Call with the neck's levels, the CLS token 'b c' and the image size."""

    def __init__(self, points: dict | None, normal: dict | None = None, mask: dict | None = None,
                 scale_dims: Sequence[int] | None = None, remap_output: str = 'exp'):
        super().__init__()
        if remap_output not in REMAPS:
            raise ValueError(f"unknown remap_output {remap_output!r}; choose one of {', '.join(REMAPS)}")
        self.remap_output = remap_output
        self.outputs = [name for name, cfg in (('points', points), ('normal', normal), ('mask', mask)) if cfg]
        for name in self.outputs:
            cfg = {'points': points, 'normal': normal, 'mask': mask}[name]
            setattr(self, f'{name}_head', ConvStack(**cfg))
        self.scale_head = mlp(scale_dims) if scale_dims else None

    def forward(self, levels: list[torch.Tensor], cls_token: torch.Tensor, size: tuple[int, int]) -> dict:
        out = {}
        for name in self.outputs:
            x = getattr(self, f'{name}_head')(levels)[-1]
            x = F.interpolate(x, size, mode='bilinear', align_corners=False, antialias=False)
            if name == 'points':
                out[name] = remap_points(x.permute(0, 2, 3, 1), self.remap_output)
            elif name == 'normal':
                out[name] = F.normalize(x.permute(0, 2, 3, 1), dim=-1)
            else:
                out[name] = x.squeeze(1).sigmoid()
        if self.scale_head is not None:
            out['metric_scale'] = self.scale_head(cls_token).squeeze(1).exp()
        return out
