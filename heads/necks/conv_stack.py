"""MoGe's convolutional pyramid (Wang et al. 2025, microsoft/MoGe ``ConvStack``): MoGe-2's neck and each of its dense
heads. Level i's input (if any) is projected by a 1x1 conv and added to the running map, which goes through residual
conv blocks, is read out by a 1x1 conv (or as it is), then doubled in size by a resampler into level i + 1:

    level i:  x = x + input_blocks[i](inputs[i]);  x = res_blocks[i](x);  out[i] = output_blocks[i](x)
              x = resamplers[i](x)   'b c_i h w -> b c_{i+1} 2h 2w'

The module names (``input_blocks``, ``res_blocks.{i}.{j}.layers.{k}``, ``skip_connection``, ``resamplers``,
``output_blocks``) are the authors' state-dict keys, so their neck and heads load as they are.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..registry import MODELS

_ACTIVATIONS = {'relu': nn.ReLU, 'silu': nn.SiLU, 'elu': nn.ELU,
                'leaky_relu': lambda: nn.LeakyReLU(negative_slope=0.2)}


def _norm(kind: str, channels: int) -> nn.Module:
    """'group_norm' (groups of 32 channels), 'layer_norm' (one group), 'instance_norm' or 'none'."""
    if kind == 'group_norm':
        return nn.GroupNorm(channels // 32, channels)
    if kind == 'layer_norm':
        return nn.GroupNorm(1, channels)
    if kind == 'instance_norm':
        return nn.InstanceNorm2d(channels)
    if kind == 'none':
        return nn.Identity()
    raise ValueError(f"unknown norm {kind!r}; choose group_norm, layer_norm, instance_norm or none")


def _conv3(c_in: int, c_out: int) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, padding=1, padding_mode='replicate')


class ResidualConvBlock(nn.Module):
    """x + (norm, act, conv3x3, norm, act, conv3x3)(x), replicate-padded; 'b c h w -> b c h w'."""

    def __init__(self, channels: int, hidden: int, activation: str = 'relu', in_norm: str = 'layer_norm',
                 hidden_norm: str = 'group_norm'):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(_ACTIVATIONS)}")
        act = _ACTIVATIONS[activation]
        self.layers = nn.Sequential(_norm(in_norm, channels), act(), _conv3(channels, hidden),
                                    _norm(hidden_norm, hidden), act(), _conv3(hidden, channels))
        self.skip_connection = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x) + self.skip_connection(x)


def resampler(kind: str, c_in: int, c_out: int) -> nn.Sequential:
    """A 2x upsampler 'b c_in h w -> b c_out 2h 2w': 'conv_transpose' (2x2 stride-2 transposed conv), 'bilinear' or
    'nearest' (interpolation), each then a replicate-padded 3x3 conv."""
    if kind == 'conv_transpose':
        return nn.Sequential(nn.ConvTranspose2d(c_in, c_out, 2, stride=2), _conv3(c_out, c_out))
    if kind in ('bilinear', 'nearest'):
        up = nn.Upsample(scale_factor=2, mode=kind, align_corners=False if kind == 'bilinear' else None)
        return nn.Sequential(up, _conv3(c_in, c_out))
    raise ValueError(f"unsupported resampler {kind!r}: MoGe-2 uses 'conv_transpose', 'bilinear' (and 'nearest')")


def _per_level(value, levels: int, name: str) -> list:
    values = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value] * levels
    if len(values) != levels:
        raise ValueError(f"{name} gives {len(values)} values for {levels} levels (dim_res_blocks)")
    return values


@MODELS.register_module()
class ConvStack(nn.Module):
    """Levels of widths ``dim_res_blocks``, each at twice the previous size (module docstring).

    ``dim_in``: per level the input width, None for no input; ``dim_out``: per level the output width, None for the
    map as it is; ``resamplers``: one kind (or one per step) for the ``len(dim_res_blocks) - 1`` steps;
    ``num_res_blocks``: per level (or one for all). Inputs: a list, per level 'b dim_in_i h_i w_i' or None, with
    h_i = h_0 2^i; outputs: per level 'b dim_out_i h_i w_i'."""

    def __init__(self, dim_in, dim_res_blocks: Sequence[int], dim_out, resamplers, dim_times_res_block_hidden: int = 1,
                 num_res_blocks=1, res_block_in_norm: str = 'layer_norm', res_block_hidden_norm: str = 'group_norm',
                 activation: str = 'relu'):
        super().__init__()
        widths = list(dim_res_blocks)
        n = len(widths)
        ins, outs = _per_level(dim_in, n, 'dim_in'), _per_level(dim_out, n, 'dim_out')
        blocks = _per_level(num_res_blocks, n, 'num_res_blocks')
        kinds = _per_level(resamplers, n - 1, 'resamplers')
        self.input_blocks = nn.ModuleList(nn.Identity() if c is None else nn.Conv2d(c, w, 1)
                                          for c, w in zip(ins, widths))
        self.resamplers = nn.ModuleList(resampler(k, a, b) for k, a, b in zip(kinds, widths[:-1], widths[1:]))
        self.res_blocks = nn.ModuleList(
            nn.Sequential(*(ResidualConvBlock(w, dim_times_res_block_hidden * w, activation, res_block_in_norm,
                                              res_block_hidden_norm) for _ in range(k)))
            for w, k in zip(widths, blocks))
        self.output_blocks = nn.ModuleList(nn.Identity() if c is None else nn.Conv2d(w, c, 1)
                                           for c, w in zip(outs, widths))

    def forward(self, inputs: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
        if len(inputs) != len(self.res_blocks):
            raise ValueError(f"ConvStack has {len(self.res_blocks)} levels but got {len(inputs)} inputs")
        outputs = []
        for i, (project, blocks, read) in enumerate(zip(self.input_blocks, self.res_blocks, self.output_blocks)):
            if i == 0:
                x = project(inputs[0])
            elif inputs[i] is not None:
                x = x + project(inputs[i])
            x = blocks(x)
            outputs.append(read(x))
            if i < len(self.resamplers):
                x = self.resamplers[i](x)
        return outputs
