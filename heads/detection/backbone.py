"""A zoo backbone with its detection pyramid: one module meeting the backbone contract (:mod:`zoo.contract`), maps
finest first, the max-pooled level last."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import zoo
from zoo.contract import Backbone, Taps

from ..necks.pyramid import pyramid_for


class PyramidBackbone(Backbone):
    """``zoo.create_backbone(name, pretrained=..., **backbone_kwargs)`` followed by :func:`pyramid_for` its levels:
    strides 4, 8, 16, 32 and 64 (the max-pooled level) for ViT/16, ViT/14 and CoAtNet; 4, 8, 16, 32 for CvT.

    ``input_multiple`` is the least common multiple of the pyramid's strides (32 for five levels), as detection
    frameworks pad images: an input the body cannot take as it is (a patch-14 ViT on a 96x128 image) is zero-padded
    at the bottom and right to the body's own multiple, and every level cropped back to ceil(H / stride) (the
    padding's cells dropped; the kept cells sit where they would without it)."""
    pooled_last_level = True

    def __init__(self, name: str, pretrained=None, out_channels: int = 256, **backbone_kwargs):
        super().__init__()
        self.body = zoo.create_backbone(name, pretrained=pretrained, **backbone_kwargs)
        self.pyramid = pyramid_for(self.body.out_channels, self.body.out_strides, out_channels)
        self.out_strides = list(self.pyramid.out_strides)
        self.out_channels = [out_channels] * len(self.out_strides)
        self.out_indices = tuple(range(len(self.out_strides)))
        self.input_multiple = math.lcm(*self.out_strides[:-1])  # the pooled level: ceil
        self.in_chans, self.min_input_size = self.body.in_chans, self.body.min_input_size
        self.pretrained_cfg = self.body.pretrained_cfg

    def forward_taps(self, x: torch.Tensor) -> Taps:
        """'b c H W' -> a map 'b c ceil(H/s) ceil(W/s)' per stride s."""
        height, width = x.shape[-2:]
        multiple = self.body.input_multiple
        # non-negative operands only: an exported graph's integer division truncates toward zero
        x = F.pad(x, (0, (multiple - width % multiple) % multiple, 0, (multiple - height % multiple) % multiple))
        maps = self.pyramid(self.body(x))
        return Taps([m[..., :(height + s - 1) // s, :(width + s - 1) // s] for m, s in zip(maps, self.out_strides)],
                    None)
