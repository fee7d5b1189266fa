"""Losses: the dense ones (cross-entropy with ignore index and class weights; scale-and-shift-invariant with gradient
matching for relative depth; SiLog for metric depth; Video Depth Anything's spatial and temporal loss over clips),
DeiT's distillation objective and the mask-classification loss with Hungarian matching (Mask2Former, EoMT)."""
from .dense import CrossEntropyLoss, ScaleShiftInvariantLoss, SiLogLoss, align_scale_shift, gradient_matching
from .distillation import build_teacher, distillation_loss
from .mask_classification import MaskClassificationLoss
from .mask_matching import MaskMatcher
from .video_depth import VideoDepthLoss

__all__ = ['CrossEntropyLoss', 'MaskClassificationLoss', 'MaskMatcher', 'ScaleShiftInvariantLoss', 'SiLogLoss',
           'VideoDepthLoss', 'align_scale_shift', 'build_teacher', 'distillation_loss', 'gradient_matching']
