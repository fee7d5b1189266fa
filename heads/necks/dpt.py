"""DPT neck (Ranftl et al. 2021): reassemble backbone levels into a pyramid, then fuse it coarse to fine.

Token backbones (one stride, prefix tokens) and hierarchical ones (maps at strides 4/8/16/32) take the same
path: each level's resampling factor is its input stride over its target stride (ViT-B/16: x4, x2, x1,
x0.5; a hierarchical backbone: x1 everywhere). DPT-Hybrid's ResNet maps enter as they are (``plain_levels``).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from zoo.core.resize import interpolate

from ..conv_init import check_init, conv_module_init
from ..registry import MODELS
from .level_mix import LevelMix

READOUTS = ('ignore', 'add', 'project')


class Readout(nn.Module):
    """How a level's prefix tokens 'b p c' enter its map 'b c h w' (official DPT semantics).

    ignore:  the map alone;
    add:     map + readout token, the readout being CLS, or the mean of CLS and distillation for DeiT;
    project: GELU(Linear([token, CLS])) per position (2c -> c).
    """

    def __init__(self, mode: str, dim: int, prefix_names=()):
        super().__init__()
        if mode not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {mode!r}")
        names = list(prefix_names)
        if mode != 'ignore' and 'cls' not in names:
            raise ValueError(f"readout {mode!r} needs a CLS token but the backbone's prefix tokens are {names}; "
                             f"use readout='ignore'")
        self.mode = mode
        self.cls_index = names.index('cls') if 'cls' in names else None
        self.add_indices = [names.index(n) for n in ('cls', 'dist') if n in names]
        self.project = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU()) if mode == 'project' else None

    def forward(self, x: torch.Tensor, prefix: torch.Tensor | None) -> torch.Tensor:
        if self.mode == 'ignore':
            return x
        if prefix is None:
            raise ValueError(f"readout {self.mode!r} got a level without prefix tokens (a convolutional tap of a "
                             f"hybrid backbone, see its prefix_taps): list that level in the DPT neck's plain_levels "
                             f"or use readout='ignore'")
        if self.mode == 'add':
            readout = prefix[:, self.add_indices].mean(dim=1)  # b c
            return x + readout[:, :, None, None]
        h = x.shape[-2]
        tokens = rearrange(x, 'b c h w -> b (h w) c')
        cls = prefix[:, self.cls_index:self.cls_index + 1].expand_as(tokens)
        return rearrange(self.project(torch.cat([tokens, cls], dim=-1)), 'b (h w) c -> b c h w', h=h)


def resampler(channels: int, factor: float) -> nn.Module:
    """x4/x2 transposed conv (k = s = factor), x1 identity, x0.5/x0.25 strided 3x3 conv."""
    if factor > 1:
        return nn.ConvTranspose2d(channels, channels, int(factor), stride=int(factor))
    if factor == 1:
        return nn.Identity()
    return nn.Conv2d(channels, channels, 3, stride=int(round(1 / factor)), padding=1)


class ReassembleLevel(nn.Module):
    """Readout -> 1x1 projection to this level's width -> resampling to its target stride; ``plain``: none of them,
    the map as it is."""

    def __init__(self, in_channels: int, out_channels: int, factor: float, readout: str, prefix_names=(),
                 plain: bool = False):
        super().__init__()
        self.readout = Readout('ignore' if plain else readout, in_channels, prefix_names)
        self.proj = nn.Identity() if plain else nn.Conv2d(in_channels, out_channels, 1)
        self.resample = nn.Identity() if plain else resampler(out_channels, factor)

    def forward(self, x: torch.Tensor, prefix: torch.Tensor | None = None) -> torch.Tensor:
        return self.resample(self.proj(self.readout(x, prefix)))


class ResidualConvUnit(nn.Module):
    """x + conv(act(conv(act(x)))) with 3x3 convs, optionally batch-normalised (pre-activation unit)."""

    def __init__(self, channels: int, batch_norm: bool = False, bias: bool | None = None):
        super().__init__()
        bias = not batch_norm if bias is None else bias
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=bias)
        self.bn1 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=bias)
        self.bn2 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(F.relu(x))), inplace=True)  # conv/BN backward never read their output
        return x + self.bn2(self.conv2(y))


class FusionBlock(nn.Module):
    """out = proj(up2(res2(x + res1(skip)))) where skip is resized to x; the deepest level has no skip.

    The 1x1 projection is applied before the upsampling: both are linear per pixel and bilinear weights sum
    to 1, so up2(proj(y)) = proj(up2(y)) exactly, at a quarter of the projection's cost and memory.
    """

    def __init__(self, channels: int, batch_norm: bool = False, bias: bool | None = None, skip_unit: bool = True):
        super().__init__()
        self.res1 = ResidualConvUnit(channels, batch_norm, bias) if skip_unit else None
        self.res2 = ResidualConvUnit(channels, batch_norm, bias)
        self.proj = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None, size=None) -> torch.Tensor:
        """``size``: upsample to it instead of x2 (Depth Anything's fusion, to the next finer level's size)."""
        if skip is not None:
            if skip.shape[-2:] != x.shape[-2:]:
                skip = interpolate(skip, size=x.shape[-2:], mode='bilinear', align_corners=False)
            x = x + self.res1(skip)
        return interpolate(self.proj(self.res2(x)), size=size, scale_factor=None if size is not None else 2,
                           mode='bilinear', align_corners=True)


@MODELS.register_module()
class DPTNeck(nn.Module):
    """Reassemble + fusion. ``forward(maps, prefixes=None)`` returns the fused maps deepest first
    (strides 16, 8, 4, 2 for the default targets); heads read the last, finest one.

    in_channels / in_strides / prefix_names describe the backbone (task models fill them in from it).
    fusion_batch_norm: BatchNorm in the fusion blocks' residual units, their convs then without bias (mmseg).
    deepest_skip_unit: the deepest fusion block has a skip residual unit too, which it never uses (it has no skip
    input; the official DPT and HF keep it); False leaves it out, as mmseg does (and DDP then needs no
    ``find_unused_parameters``).
    init: 'torch' (PyTorch's defaults) or 'mmseg' (mmcv's ConvModule kaiming init; :mod:`heads.conv_init`).
    ``level_mix``: the backbone gives more levels than the neck has (a ViT tapped at every block) and a learned
    softmax mix over all of them makes each neck level (:class:`heads.necks.level_mix.LevelMix`).
    ``plain_levels``: levels that enter the fusion convs as the backbone gives them, without readout, projection or
    resampling (DPT-Hybrid's ResNet stages; transformers' ``neck_ignore_stages``): their in_channels must be their
    hidden_channels and their in_strides their out_strides.
    """

    def __init__(self, in_channels: Sequence[int], in_strides: Sequence[int], prefix_names: Sequence[str] = (),
                 readout: str = 'project', hidden_channels: Sequence[int] = (96, 192, 384, 768),
                 out_strides: Sequence[float] = (4, 8, 16, 32), fusion_channels: int = 256,
                 fusion_batch_norm: bool = False, fusion_bias: bool | None = None, deepest_skip_unit: bool = True,
                 init: str = 'torch', level_mix: bool = False, plain_levels: Sequence[int] = ()):
        super().__init__()
        self.level_mix = LevelMix.for_neck(in_channels, in_strides, len(hidden_channels)) if level_mix else None
        if level_mix:  # the neck's levels are the mixes: one per hidden width, of the backbone's width and stride
            in_channels, in_strides = [in_channels[0]] * len(hidden_channels), [in_strides[0]] * len(hidden_channels)
        lengths = {len(in_channels), len(in_strides), len(hidden_channels), len(out_strides)}
        if len(lengths) != 1:
            raise ValueError(f"DPTNeck needs one entry per level in in_channels {list(in_channels)}, in_strides "
                             f"{list(in_strides)}, hidden_channels {list(hidden_channels)} and out_strides "
                             f"{list(out_strides)}")
        factors = [s_in / s_out for s_in, s_out in zip(in_strides, out_strides)]
        for f in factors:
            if f not in (0.25, 0.5, 1, 2, 4, 8):
                raise ValueError(f"cannot resample strides {list(in_strides)} to {list(out_strides)}: "
                                 f"factor {f} is not a power of two in [1/4, 8]")
        readout = readout if prefix_names else 'ignore'
        plain = self._check_plain_levels(plain_levels, in_channels, hidden_channels, factors)
        self.factors = factors
        self.level_strides = list(out_strides)  # the reassembled levels' strides, which fusion adds up exactly
        self.reassemble = nn.ModuleList(ReassembleLevel(c_in, c_out, f, readout, prefix_names, plain=i in plain)
                                        for i, (c_in, c_out, f) in enumerate(zip(in_channels, hidden_channels,
                                                                                 factors)))
        self.convs = nn.ModuleList(nn.Conv2d(c, fusion_channels, 3, padding=1, bias=False) for c in hidden_channels)
        self.fusion = nn.ModuleList(FusionBlock(fusion_channels, fusion_batch_norm, fusion_bias,
                                                skip_unit=deepest_skip_unit or i > 0)
                                    for i in range(len(hidden_channels)))
        self.out_channels = fusion_channels
        if check_init(init) == 'mmseg':  # the convs mmseg builds as ConvModules
            conv_module_init(*[level.proj for level in self.reassemble], *self.convs,
                             *[m for block in self.fusion for m in block.modules() if m is not block])

    @staticmethod
    def _check_plain_levels(plain_levels, in_channels, hidden_channels, factors) -> set[int]:
        plain = set(plain_levels)
        if any(not isinstance(i, int) or not 0 <= i < len(factors) for i in plain):
            raise ValueError(f"plain_levels must be level indices in [0, {len(factors)}), got {list(plain_levels)}")
        for i in sorted(plain):
            if in_channels[i] != hidden_channels[i] or factors[i] != 1:
                raise ValueError(f"plain level {i} enters the fusion as it is, so its input must already be the "
                                 f"level's width and stride: in_channels {in_channels[i]} vs hidden_channels "
                                 f"{hidden_channels[i]}, resampling x{factors[i]} (in_strides / out_strides) vs x1")
        return plain

    def forward(self, maps: list[torch.Tensor], prefixes: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        if self.level_mix is not None:
            maps, prefixes = self.level_mix(maps, prefixes)
        return self.fuse(self.reassembled(maps, prefixes))

    def reassembled(self, maps: list[torch.Tensor], prefixes: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Each level's readout, projection and resampling (before its fusion conv), finest first."""
        prefixes = prefixes if prefixes is not None else [None] * len(maps)
        return [level(x, p) for level, x, p in zip(self.reassemble, maps, prefixes)]

    def fuse(self, levels: list[torch.Tensor], after=None) -> list[torch.Tensor]:
        """The reassembled ``levels`` (finest first) through their convs and the fusion blocks: the fused maps,
        deepest first. ``after(i, fused)``: what fusion block i's result (deepest first) becomes before the next block
        reads it (a subclass's extra step; none by default)."""
        levels = [conv(x) for conv, x in zip(self.convs, levels)][::-1]  # deepest first
        fused, outputs = None, []
        for i, (block, x, size) in enumerate(zip(self.fusion, levels, self.fusion_sizes(levels))):
            fused = block(x, size=size) if fused is None else block(fused, x, size=size)
            if after is not None:
                fused = after(i, fused)
            outputs.append(fused)
        return outputs

    def fusion_sizes(self, levels: list[torch.Tensor]) -> list:
        """What each fusion block (deepest first) upsamples its result to: None for x2, DPT's rule."""
        return [None] * len(levels)
