"""Backbone families, one file each; importing a family registers its named variants."""
from . import coatnet, crossvit, cvt, deit, dinov2, vit  # noqa: F401  (registration)
from .coatnet import CoAtNetBackbone, CoAtNetClassifier, CoAtNetEncoder
from .crossvit import CrossViTBackbone, CrossViTClassifier, CrossViTEncoder
from .cvt import CvTBackbone, CvTClassifier, CvTEncoder
from .deit import DistilledBackbone, DistilledClassifier
from .vit import ViTBackbone, ViTClassifier, ViTEncoder

__all__ = ['CoAtNetBackbone', 'CoAtNetClassifier', 'CoAtNetEncoder', 'CrossViTBackbone', 'CrossViTClassifier',
           'CrossViTEncoder', 'CvTBackbone', 'CvTClassifier', 'CvTEncoder', 'DistilledBackbone', 'DistilledClassifier',
           'ViTBackbone', 'ViTClassifier', 'ViTEncoder']
