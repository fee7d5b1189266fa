"""DeiT (Touvron et al. 2021): ViT trained data-efficiently, optionally with a distillation token.

The distilled models put a second prefix token after CLS and read it with a second head: in training
they return both logits (CLS head for the label, distillation head for the teacher), in evaluation
their mean.
"""
from __future__ import annotations

import torch

from ..registry import register_variant
from .vit import VIT, VIT_SIZES, ViTBackbone, ViTClassifier


class DistilledClassifier(ViTClassifier):
    """ViT classifier with the distillation token and ``head_dist``."""

    def __init__(self, **kwargs):
        if kwargs.setdefault('global_pool', 'token') != 'token':
            raise ValueError("the distilled heads read the CLS and distillation tokens: global_pool must be 'token'")
        super().__init__(dist_token=True, **kwargs)
        self.head_dist = self._new_head()

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False):
        cls, dist = self.head_drop(x[:, 0]), self.head_drop(x[:, 1])  # b d each
        if pre_logits:
            return (cls + dist) / 2
        cls, dist = self.head(cls), self.head_dist(dist)
        return (cls, dist) if self.training else (cls + dist) / 2


class DistilledBackbone(ViTBackbone):
    """DeiT-distilled as a dense backbone: its prefix tokens are CLS and distillation ('cls', 'dist')."""

    def __init__(self, **kwargs):
        super().__init__(dist_token=True, **kwargs)


DISTILLED = {'backbone': DistilledBackbone, 'classifier': DistilledClassifier}
for _size, _res in [('tiny', 224), ('small', 224), ('base', 224), ('base', 384)]:
    register_variant(f'deit_{_size}_patch16_{_res}', VIT, input_size=_res, patch_size=16, **VIT_SIZES[_size])
    register_variant(f'deit_{_size}_distilled_patch16_{_res}', DISTILLED, input_size=_res, patch_size=16,
                     **VIT_SIZES[_size])

__all__ = ['DistilledBackbone', 'DistilledClassifier']
