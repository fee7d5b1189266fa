"""Losses: the dense ones (cross-entropy with ignore index and class weights; scale-and-shift-invariant with gradient
matching for relative depth; SiLog for metric depth), DeiT's distillation objective and the mask-classification loss
with Hungarian matching (Mask2Former, EoMT)."""
from .dense import CrossEntropyLoss, ScaleShiftInvariantLoss, SiLogLoss, align_scale_shift
from .distillation import build_teacher, distillation_loss
from .mask_classification import MaskClassificationLoss
from .mask_matching import MaskMatcher

__all__ = ['CrossEntropyLoss', 'MaskClassificationLoss', 'MaskMatcher', 'ScaleShiftInvariantLoss', 'SiLogLoss',
           'align_scale_shift', 'build_teacher', 'distillation_loss']
