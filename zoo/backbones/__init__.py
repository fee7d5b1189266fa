"""Backbone families, one file each; importing a family registers its named variants."""
from . import cvt, deit, vit  # noqa: F401  (registration)
from .cvt import CvTBackbone, CvTClassifier, CvTEncoder
from .deit import DistilledBackbone, DistilledClassifier
from .vit import ViTBackbone, ViTClassifier, ViTEncoder

__all__ = ['CvTBackbone', 'CvTClassifier', 'CvTEncoder', 'DistilledBackbone', 'DistilledClassifier', 'ViTBackbone',
           'ViTClassifier', 'ViTEncoder']
