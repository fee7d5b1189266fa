"""Similarities other than the scaled dot product, as mixins of :class:`zoo.core.Attention` (the one part that
owns a parameter of the attention itself: checkpoints keep it as ``attn.logit_scale``, as timm does)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .weight_decay import NoWeightDecay


class CosineSimilarity(NoWeightDecay):
    """Swin V2's logits: cos(q, k) times a learned per-head temperature ``logit_scale`` 'heads 1 1', kept in log
    space (initialised at log 10) and clamped at log(100) before exp, as the reference does; no weight decay on it
    (as timm). Mix in before an :class:`~zoo.core.Attention` class:
    ``class CosineWindowAttention(CosineSimilarity, ShiftedWindowAttention)``."""
    no_weight_decay_names = ('logit_scale',)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.logit_scale = nn.Parameter(torch.full((self.num_heads, 1, 1), math.log(10.0)))

    def similarity(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        # cos(q, k) * exp(min(logit_scale, log 100)), the factor folded into q
        q = F.normalize(q, dim=-1) * self.logit_scale.clamp(max=math.log(100.0)).exp()
        return q, F.normalize(k, dim=-1), 1.0
