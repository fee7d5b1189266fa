"""A zoo backbone with its detection pyramid: one module meeting the backbone contract (:mod:`zoo.contract`), maps
finest first, the max-pooled level last."""
from __future__ import annotations

import math

import torch

import zoo
from zoo.contract import Backbone, Taps

from ..necks.pyramid import pyramid_for


class PyramidBackbone(Backbone):
    """``zoo.create_backbone(name, pretrained=..., **backbone_kwargs)`` followed by :func:`pyramid_for` its levels:
    strides 4, 8, 16, 32 and 64 (the max-pooled level) for ViT/16 and CoAtNet; 4, 8, 16, 32 for CvT."""
    pooled_last_level = True

    def __init__(self, name: str, pretrained=None, out_channels: int = 256, **backbone_kwargs):
        super().__init__()
        self.body = zoo.create_backbone(name, pretrained=pretrained, **backbone_kwargs)
        self.pyramid = pyramid_for(self.body.out_channels, self.body.out_strides, out_channels)
        self.out_strides = list(self.pyramid.out_strides)
        self.out_channels = [out_channels] * len(self.out_strides)
        self.out_indices = tuple(range(len(self.out_strides)))
        self.input_multiple = math.lcm(self.body.input_multiple, *self.out_strides[:-1])  # the pooled level: ceil
        self.in_chans, self.min_input_size = self.body.in_chans, self.body.min_input_size
        self.pretrained_cfg = self.body.pretrained_cfg

    def forward_taps(self, x: torch.Tensor) -> Taps:
        return Taps(self.pyramid(self.body(x)), None)
