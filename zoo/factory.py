"""Building named models, optionally with pretrained weights."""
from __future__ import annotations

from torch import nn

from .registry import get_variant
from .weights import load_pretrained


def create_backbone(name: str, *, pretrained=None, out_indices=None, **overrides) -> nn.Module:
    """A dense backbone: ``forward(x)`` gives NCHW maps at ``out_indices`` with ``out_channels``/``out_strides``.

    ``pretrained`` is a path (.safetensors/.pth/.pt/.bin or an HF folder) or a state dict in this project's
    or timm's layout; a classifier checkpoint loads with its head dropped.
    """
    if out_indices is not None:
        overrides['out_indices'] = tuple(out_indices)
    model = get_variant(name).build('backbone', **overrides)
    if pretrained is not None:
        load_pretrained(model, pretrained)
    return model


def create_classifier(name: str, *, pretrained=None, num_classes: int = 1000, **overrides) -> nn.Module:
    """An image classifier returning logits, numerically the reference model given the same weights."""
    model = get_variant(name).build('classifier', num_classes=num_classes, **overrides)
    if pretrained is not None:
        load_pretrained(model, pretrained)
    return model
