"""A zoo backbone with its detection pyramid: one module, maps finest first, out_channels/out_strides."""
from __future__ import annotations

import torch
from torch import nn

import zoo

from ..necks.pyramid import pyramid_for


class PyramidBackbone(nn.Module):
    """``zoo.create_backbone(name, pretrained=..., **backbone_kwargs)`` followed by :func:`pyramid_for` its levels:
    strides 4, 8, 16, 32 and 64 (the max-pooled level) for ViT/16 and CoAtNet; 4, 8, 16, 32 for CvT."""
    pooled_last_level = True

    def __init__(self, name: str, pretrained=None, out_channels: int = 256, **backbone_kwargs):
        super().__init__()
        self.body = zoo.create_backbone(name, pretrained=pretrained, **backbone_kwargs)
        self.pyramid = pyramid_for(self.body.out_channels, self.body.out_strides, out_channels)
        self.out_channels = [out_channels] * len(self.pyramid.out_strides)
        self.out_strides = list(self.pyramid.out_strides)
        self.pretrained_cfg = self.body.pretrained_cfg

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return self.pyramid(self.body(x))
