"""Zoo backbones as config-buildable parts: ``dict(type='ZooBackbone', name='vit_base_patch16_224', ...)``.

Everything here reads a backbone through the contract (:mod:`zoo.contract`) only."""
from __future__ import annotations

import zoo
from zoo.contract import Backbone

from ..registry import MODELS

# dict(type='ZooBackbone', name=..., pretrained=..., out_indices=..., **overrides) -> zoo.create_backbone(...)
MODELS.register_module(name='ZooBackbone', module=zoo.create_backbone)


def backbone_description(backbone: Backbone) -> dict:
    """What a neck needs to know about a backbone's outputs."""
    return {'in_channels': list(backbone.out_channels), 'in_strides': list(backbone.out_strides),
            'prefix_names': list(backbone.prefix_names)}
