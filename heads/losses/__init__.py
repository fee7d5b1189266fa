"""Losses: the dense ones (cross-entropy with ignore index and class weights; scale-and-shift-invariant with gradient
matching for relative depth; SiLog for metric depth) and DeiT's distillation objective."""
from .dense import CrossEntropyLoss, ScaleShiftInvariantLoss, SiLogLoss, align_scale_shift
from .distillation import build_teacher, distillation_loss

__all__ = ['CrossEntropyLoss', 'ScaleShiftInvariantLoss', 'SiLogLoss', 'align_scale_shift', 'build_teacher',
           'distillation_loss']
