"""Thin views of a backbone (:mod:`zoo.contract`: a zoo backbone, or :class:`PyramidBackbone`) in the shapes
detection frameworks expect.

- :class:`TorchvisionView`: ``OrderedDict`` '0', '1', ... ('pool' for a max-pooled last level) and one int
  ``out_channels``, the contract of ``torchvision.models.detection`` backbones.
- :class:`Detectron2View`: a dict of named maps and ``output_shape()`` -> {name: ShapeSpec(channels, stride)},
  ``size_divisibility``, like ``detectron2.modeling.Backbone``.
- :class:`MMDetView`: a tuple of the maps at ``out_indices``, like an mmdet backbone.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import NamedTuple

import torch
from torch import nn

import zoo
from zoo.contract import Backbone

from ..registry import MODELS
from .backbone import PyramidBackbone


class ShapeSpec(NamedTuple):
    """detectron2's ShapeSpec fields."""
    channels: int | None = None
    height: int | None = None
    width: int | None = None
    stride: int | None = None


class TorchvisionView(nn.Module):
    """``forward(x) -> OrderedDict[str, 'b c h w']``; every level must have the same channel count."""

    def __init__(self, module: Backbone):
        super().__init__()
        if len(set(module.out_channels)) != 1:
            raise ValueError(f"torchvision detectors need one channel count for every level, got "
                             f"{list(module.out_channels)}; wrap the backbone in PyramidBackbone")
        self.module = module
        self.out_channels = module.out_channels[0]
        self.names = [str(i) for i in range(len(module.out_strides))]
        if module.pooled_last_level:
            self.names[-1] = 'pool'

    def forward(self, x: torch.Tensor) -> OrderedDict:
        return OrderedDict(zip(self.names, self.module(x)))


class Detectron2View(nn.Module):
    """Named maps: 'last_feat' for a single map (detectron2's ViT name), 'p2'..'p6' by log2(stride) when the
    strides differ (its FPN names), else 'feat0', 'feat1', ..."""

    def __init__(self, module: Backbone):
        super().__init__()
        self.module = module
        strides = list(module.out_strides)
        if len(strides) == 1:
            self.names = ['last_feat']
        elif len(set(strides)) == len(strides):
            self.names = [f'p{int(math.log2(s))}' for s in strides]
        else:
            self.names = [f'feat{i}' for i in range(len(strides))]
        self.size_divisibility = max(strides)

    def output_shape(self) -> dict[str, ShapeSpec]:
        return {name: ShapeSpec(channels=c, stride=s)
                for name, c, s in zip(self.names, self.module.out_channels, self.module.out_strides)}

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return dict(zip(self.names, self.module(x)))


class MMDetView(nn.Module):
    """``forward(x) -> tuple`` of the maps at ``out_indices`` (default: all) of ``module``'s levels."""

    def __init__(self, module: Backbone, out_indices=None):
        super().__init__()
        count = len(module.out_strides)
        self.out_indices = tuple(range(count) if out_indices is None else out_indices)
        if not all(-count <= i < count for i in self.out_indices):
            raise ValueError(f"out_indices {self.out_indices} out of range for {count} levels")
        self.module = module
        self.out_channels = [module.out_channels[i] for i in self.out_indices]
        self.out_strides = [module.out_strides[i] for i in self.out_indices]

    def init_weights(self) -> None:
        """Weights come from ``pretrained`` when the backbone is built; mmengine's init call has nothing to do."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        maps = self.module(x)
        return tuple(maps[i] for i in self.out_indices)


@MODELS.register_module()
def ZooMMDetBackbone(name: str, out_indices=None, pyramid: bool = False, pretrained=None,
                     out_channels: int = 256, **backbone_kwargs) -> MMDetView:
    """``dict(type='ZooMMDetBackbone', name=..., out_indices=(0, 1, 2, 3))`` in an mmdet config (after
    registering it in mmdet's MODELS): the zoo backbone's maps, or with ``pyramid=True`` its detection pyramid."""
    module = (PyramidBackbone(name, pretrained, out_channels, **backbone_kwargs) if pyramid
              else zoo.create_backbone(name, pretrained=pretrained, **backbone_kwargs))
    return MMDetView(module, out_indices)
