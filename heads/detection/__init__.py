"""Detection: zoo backbones with a feature pyramid, as torchvision detectors and in detectron2 / mmdet shapes."""
from .backbone import PyramidBackbone
from .build import build_detector
from .views import Detectron2View, MMDetView, ShapeSpec, TorchvisionView, ZooMMDetBackbone

__all__ = ['Detectron2View', 'MMDetView', 'PyramidBackbone', 'ShapeSpec', 'TorchvisionView', 'ZooMMDetBackbone',
           'build_detector']
