"""Mask2Former (Cheng et al. 2022) over any zoo backbone: backbone -> pixel decoder -> masked-attention decoder.

A hierarchical backbone (Swin, CvT, CoAtNet: maps at strides 4..32; of a stride tapped twice, the last map) feeds the
pixel decoder (:class:`heads.decode_heads.mask2former_pixel_decoder.Mask2FormerPixelDecoder`) directly; a plain one
(one stride, ViT/16) goes through ``neck`` first, by default ViTDet's simple feature pyramid to strides 4, 8, 16, 32
(:class:`heads.necks.SimpleFeaturePyramid`; its extra max-pooled level is not read). The transformer decoder
(:class:`heads.decode_heads.mask2former_decoder.Mask2FormerTransformerDecoder`) gives class and mask logits per layer.

A :class:`heads.models.mask_classifier.MaskClassificationModel`: :meth:`Mask2Former.forward_logits` gives (class
logits 'b q (c+1)', mask logits 'b q H/4 W/4', aux), ``aux`` the earlier layers' (class logits, mask logits) pairs,
first layer first, for the auxiliary losses; ``mode='tensor'`` returns the first two (transformers'
``class_queries_logits`` / ``masks_queries_logits``), ``'loss'`` the matched class, mask and dice losses of every
layer, ``'predict'`` semantic, instance or panoptic results (``test_cfg``).
"""
from __future__ import annotations

import math

import torch

from ..decode_heads.mask2former_decoder import Mask2FormerTransformerDecoder  # noqa: F401  (registers it)
from ..decode_heads.mask2former_pixel_decoder import Mask2FormerPixelDecoder  # noqa: F401  (registers it)
from ..registry import MODELS
from .backbone import backbone_description
from .dense_model import build
from .mask_classifier import MaskClassificationModel


@MODELS.register_module()
class Mask2Former(MaskClassificationModel):
    """Backbone (+ ``neck`` for plain backbones) -> ``pixel_decoder`` -> ``decoder`` (config dicts or modules); the
    number of classes is the decoder's. ``loss`` and ``test_cfg``: :class:`MaskClassificationModel`'s."""

    def __init__(self, backbone, pixel_decoder, decoder, neck=None, data_preprocessor=None, loss=None,
                 test_cfg=None, init_cfg=None):
        num_classes = decoder['num_classes'] if isinstance(decoder, dict) else decoder.class_head.out_features - 1
        super().__init__(num_classes, data_preprocessor=data_preprocessor, loss=loss, test_cfg=test_cfg,
                         init_cfg=init_cfg)
        self.backbone = build(backbone)
        described = backbone_description(self.backbone)
        if neck is None and len(set(described['in_strides'])) == 1:
            neck = dict(type='SimpleFeaturePyramid', out_strides=(4, 8, 16, 32))
        if isinstance(neck, dict):  # the pyramid as wide as the pixel decoder (256 unless its config says)
            width = pixel_decoder.get('channels', 256) if isinstance(pixel_decoder, dict) else 256
            neck = MODELS.build({'in_channels': described['in_channels'], 'in_strides': described['in_strides'],
                                 'out_channels': width, **neck})
        self.neck = neck
        strides = described['in_strides']
        last_at_stride = {s: i for i, s in enumerate(strides)}  # a stride tapped twice (CvT's last stage): its last
        self.taps = sorted(last_at_stride.values(), key=lambda i: strides[i])
        levels = {'in_channels': [described['in_channels'][i] for i in self.taps],
                  'in_strides': [strides[i] for i in self.taps]}
        if neck is not None:  # the pyramid's levels but its max-pooled last
            levels = {'in_channels': [neck.out_channels] * (len(neck.out_strides) - 1),
                      'in_strides': list(neck.out_strides[:-1])}
        self.level_strides = list(levels['in_strides'])
        self.pixel_decoder = build({**levels, **pixel_decoder} if isinstance(pixel_decoder, dict) else pixel_decoder)
        if isinstance(decoder, dict):
            decoder = {'in_channels': self.pixel_decoder.out_channels, **decoder}
        self.decoder = build(decoder)
        self.check_windows()

    @property
    def input_multiple(self) -> int:
        """What input height and width must be multiples of: the backbone's multiple and every level's stride (the
        pixel decoder adds each level to the x2 upsampled coarser one)."""
        return math.lcm(self.backbone.input_multiple, *self.level_strides)

    @property
    def coarsest_stride(self) -> int:
        """The largest stride of any map the model computes (the neck's max-pooled level included)."""
        return max(*self.backbone.out_strides, *(self.neck.out_strides if self.neck is not None else ()))

    def backbone_maps(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        """The maps the pixel decoder reads, finest first."""
        maps = self.backbone.forward_taps(inputs).maps
        return [maps[i] for i in self.taps] if self.neck is None else self.neck(maps)[:-1]

    def forward_logits(self, inputs: torch.Tensor):
        """'b 3 H W' -> (class logits 'b q (c+1)', mask logits 'b q H/4 W/4', aux: the earlier layers' pairs)."""
        mask_features, levels = self.pixel_decoder(self.backbone_maps(inputs))
        *aux, (class_logits, mask_logits) = self.decoder(levels, mask_features)
        return class_logits, mask_logits, aux
