"""Backbone families, one file each; importing a family registers its named variants."""
from . import deit, vit  # noqa: F401  (registration)
from .deit import DistilledBackbone, DistilledClassifier
from .vit import ViTBackbone, ViTClassifier, ViTEncoder

__all__ = ['DistilledBackbone', 'DistilledClassifier', 'ViTBackbone', 'ViTClassifier', 'ViTEncoder']
