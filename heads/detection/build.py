"""torchvision Faster / Mask R-CNN on a zoo backbone and its detection pyramid."""
from __future__ import annotations

from torch import nn
from torchvision.models.detection import FasterRCNN, MaskRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.ops import MultiScaleRoIAlign

from .backbone import PyramidBackbone
from .views import TorchvisionView

DETECTORS = {'fasterrcnn': FasterRCNN, 'maskrcnn': MaskRCNN}


def build_detector(kind: str, backbone: str, num_classes: int, *, pretrained=None, out_channels: int = 256,
                   anchor_size: int = 32, backbone_kwargs: dict | None = None, **detector_kwargs) -> nn.Module:
    """A ``torchvision.models.detection`` ``kind`` ('fasterrcnn' | 'maskrcnn') model whose backbone is the zoo
    model ``backbone`` (weights from ``pretrained``, options ``backbone_kwargs``) with its pyramid.

    ``num_classes`` counts the background, as in torchvision. Anchors: one size per level, ``anchor_size``
    at stride 4 doubling with the stride (torchvision's 32..512 for five levels), ratios 0.5, 1, 2; RoIs are
    pooled from every level but the max-pooled one. The images are normalised with the backbone's mean/std.
    ``detector_kwargs`` go to the torchvision class (min_size, max_size, box_detections_per_img, ...).
    """
    if kind not in DETECTORS:
        raise ValueError(f"unknown detector {kind!r}; choose one of {sorted(DETECTORS)}")
    body = TorchvisionView(PyramidBackbone(backbone, pretrained, out_channels, **(backbone_kwargs or {})))
    strides = body.module.out_strides
    sizes = tuple((anchor_size * s // strides[0],) for s in strides)
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(strides))
    pooled = body.names[:-1]
    rois = {'box_roi_pool': MultiScaleRoIAlign(pooled, output_size=7, sampling_ratio=2)}
    if kind == 'maskrcnn':
        rois['mask_roi_pool'] = MultiScaleRoIAlign(pooled, output_size=14, sampling_ratio=2)
    cfg = body.module.pretrained_cfg
    options = {'image_mean': list(cfg['mean']), 'image_std': list(cfg['std']), 'rpn_anchor_generator': anchors,
               **rois, **detector_kwargs}
    return DETECTORS[kind](body, num_classes=num_classes, **options)
