"""Backbone families, one file each; importing a family registers its named variants."""
from . import (  # noqa: F401
    aimv2,
    clip,
    coatnet,
    crossvit,
    cvt,
    deit,
    dinov2,
    dinov3,
    eva02,
    internvit,
    levit,
    naflex,
    naflex_radio,
    pe,
    pit,
    radio,
    siglip,
    swin,
    vit,
    vit_hybrid,
    vit_rope,
)
from .coatnet import CoAtNetBackbone, CoAtNetClassifier, CoAtNetEncoder
from .crossvit import CrossViTBackbone, CrossViTClassifier, CrossViTEncoder
from .cvt import CvTBackbone, CvTClassifier, CvTEncoder
from .deit import DistilledBackbone, DistilledClassifier
from .levit import LeViTBackbone, LeViTClassifier, LeViTEncoder
from .pit import PiTBackbone, PiTClassifier, PiTEncoder
from .swin import SwinBackbone, SwinClassifier, SwinEncoder
from .vit import ViTBackbone, ViTClassifier, ViTEncoder
from .vit_hybrid import ViTHybridBackbone, ViTHybridClassifier, ViTHybridEncoder

__all__ = ['CoAtNetBackbone', 'CoAtNetClassifier', 'CoAtNetEncoder', 'CrossViTBackbone', 'CrossViTClassifier',
           'CrossViTEncoder', 'CvTBackbone', 'CvTClassifier', 'CvTEncoder', 'DistilledBackbone', 'DistilledClassifier',
           'LeViTBackbone', 'LeViTClassifier', 'LeViTEncoder', 'PiTBackbone', 'PiTClassifier', 'PiTEncoder',
           'SwinBackbone', 'SwinClassifier', 'SwinEncoder', 'ViTBackbone', 'ViTClassifier', 'ViTEncoder',
           'ViTHybridBackbone', 'ViTHybridClassifier', 'ViTHybridEncoder']
