"""Backbone families, one file each; importing a family registers its named variants."""
from . import coatnet, crossvit, cvt, deit, dinov2, swin, vit, vit_rope  # noqa: F401  (registration)
from .coatnet import CoAtNetBackbone, CoAtNetClassifier, CoAtNetEncoder
from .crossvit import CrossViTBackbone, CrossViTClassifier, CrossViTEncoder
from .cvt import CvTBackbone, CvTClassifier, CvTEncoder
from .deit import DistilledBackbone, DistilledClassifier
from .swin import SwinBackbone, SwinClassifier, SwinEncoder
from .vit import ViTBackbone, ViTClassifier, ViTEncoder

__all__ = ['CoAtNetBackbone', 'CoAtNetClassifier', 'CoAtNetEncoder', 'CrossViTBackbone', 'CrossViTClassifier',
           'CrossViTEncoder', 'CvTBackbone', 'CvTClassifier', 'CvTEncoder', 'DistilledBackbone', 'DistilledClassifier',
           'SwinBackbone', 'SwinClassifier', 'SwinEncoder',
           'ViTBackbone', 'ViTClassifier', 'ViTEncoder']

from . import levit, pit  # noqa: F401  (registration: LeViT, PiT)
from .levit import LeViTBackbone, LeViTClassifier, LeViTEncoder
from .pit import PiTBackbone, PiTClassifier, PiTEncoder

__all__ += ['LeViTBackbone', 'LeViTClassifier', 'LeViTEncoder', 'PiTBackbone', 'PiTClassifier', 'PiTEncoder']
