"""Backbone families, one file each; importing a family registers its named variants."""
from . import coatnet, cvt, deit, vit  # noqa: F401  (registration)
from .coatnet import CoAtNetBackbone, CoAtNetClassifier, CoAtNetEncoder
from .cvt import CvTBackbone, CvTClassifier, CvTEncoder
from .deit import DistilledBackbone, DistilledClassifier
from .vit import ViTBackbone, ViTClassifier, ViTEncoder

__all__ = ['CoAtNetBackbone', 'CoAtNetClassifier', 'CoAtNetEncoder', 'CvTBackbone', 'CvTClassifier', 'CvTEncoder', 'DistilledBackbone', 'DistilledClassifier', 'ViTBackbone',
           'ViTClassifier', 'ViTEncoder']
