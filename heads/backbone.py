"""Zoo backbones as config-buildable parts: ``dict(type='ZooBackbone', name='vit_base_patch16_224', ...)``."""
from __future__ import annotations

import zoo

from .registry import MODELS


# dict(type='ZooBackbone', name=..., pretrained=..., out_indices=..., **overrides) -> zoo.create_backbone(...)
MODELS.register_module(name='ZooBackbone', module=zoo.create_backbone)


def backbone_description(backbone) -> dict:
    """What a neck needs to know about a backbone's outputs."""
    return {'in_channels': list(backbone.out_channels), 'in_strides': list(backbone.out_strides),
            'prefix_names': list(getattr(backbone, 'prefix_names', []))}


def backbone_features(backbone, x):
    """(maps, prefixes): token backbones give their prefix tokens per level, hierarchical ones None."""
    if hasattr(backbone, 'forward_with_prefix'):
        return backbone.forward_with_prefix(x)
    return backbone(x), None
