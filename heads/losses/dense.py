"""Losses for the dense-prediction heads: cross-entropy for segmentation, MiDaS' scale-and-shift-invariant
loss and the scale-invariant log loss for depth.

Every loss computes in float32, also under ``torch.autocast``: floating inputs are cast with ``.float()``
and the body runs with autocast disabled (reductions over millions of pixels lose too much in bf16/fp16).
Invalid depth pixels are removed with ``torch.where`` rather than multiplied by the mask, so garbage there
(inf, nan) reaches neither the value nor the gradient. Losses with nothing to average over return a zero
that is still connected to the graph, so ``backward()`` works.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.resize import interpolate

from ..io.labels import IGNORE_INDEX
from ..registry import MODELS


def _float32(a):
    return a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a


def _in_float32(fn):
    """Call ``fn`` with its floating tensor arguments cast to float32 and autocast disabled."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        device = next(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)).device
        with torch.autocast(device_type=device.type, enabled=False):
            return fn(*map(_float32, args), **{k: _float32(v) for k, v in kwargs.items()})

    return wrapper


def _check_same_shape(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> None:
    if not pred.shape == target.shape == mask.shape:
        raise ValueError(f"pred, target and mask differ in shape: {tuple(pred.shape)}, "
                         f"{tuple(target.shape)}, {tuple(mask.shape)}")


def _squeeze_channel(x: torch.Tensor, name: str) -> torch.Tensor:
    """'b 1 h w' or 'b h w' -> 'b h w'."""
    if x.ndim == 4 and x.shape[1] == 1:
        return x[:, 0]
    if x.ndim != 3:
        raise ValueError(f"{name} must be 'b 1 h w' or 'b h w', got shape {tuple(x.shape)}")
    return x


class CrossEntropyLoss(nn.Module):
    """Pixel-wise cross-entropy for semantic segmentation.

    ``forward(logits, labels)``: logits 'b k h w', labels 'b h w' (integer class ids) -> scalar.
    Logits at another resolution are first resized bilinearly (align_corners=False) to the labels' size.

    Reduction: with ``avg_non_ignore`` the mean over non-ignored pixels, weighted by ``class_weight[label]``
    when class weights are given (``F.cross_entropy(weight=..., ignore_index=...)`` semantics); without it,
    the (weighted) sum divided by all pixels, ignored ones included (mmseg's avg_non_ignore=False).
    If nothing is left to average over, the loss is a graph-connected 0.
    Labels outside [0, k) other than ``ignore_index`` raise ValueError.
    """

    def __init__(self, ignore_index: int = IGNORE_INDEX, class_weight=None, loss_weight: float = 1.0,
                 avg_non_ignore: bool = True):
        super().__init__()
        self.ignore_index = ignore_index
        self.loss_weight = loss_weight
        self.avg_non_ignore = avg_non_ignore
        weight = None if class_weight is None else torch.as_tensor(class_weight, dtype=torch.float32)
        self.register_buffer('class_weight', weight, persistent=False)

    @_in_float32
    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if logits.ndim != 4 or labels.ndim != 3:
            raise ValueError(f"expected logits 'b k h w' and labels 'b h w', got {tuple(logits.shape)} "
                             f"and {tuple(labels.shape)}")
        k = logits.shape[1]
        labels = labels.long()
        if logits.shape[-2:] != labels.shape[-2:]:
            logits = interpolate(logits, size=labels.shape[-2:], mode='bilinear', align_corners=False)
        valid = labels != self.ignore_index  # b h w
        bad = labels[valid & ((labels < 0) | (labels >= k))]
        if bad.numel():
            raise ValueError(f"labels {bad.unique().tolist()} are outside the valid range [0, {k}) "
                             f"and are not ignore_index={self.ignore_index}: the model predicts {k} classes "
                             f"(decode_head.num_classes) but the data has more; make them agree")
        weight = None if self.class_weight is None else self.class_weight.float()
        if weight is not None and weight.numel() != k:
            raise ValueError(f"class_weight has {weight.numel()} entries for {k} classes")
        # 'b h w': weight[label] * -log softmax(logits)[label], 0 where ignored
        per_pixel = F.cross_entropy(logits, labels, weight=weight, ignore_index=self.ignore_index,
                                    reduction='none')
        if self.avg_non_ignore:
            denom = valid.sum() if weight is None else weight[labels[valid]].sum()
        else:
            denom = labels.numel()
        if denom == 0:
            return logits.sum() * 0
        return self.loss_weight * per_pixel.sum() / denom


@_in_float32
def align_scale_shift(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor):
    """Per-image least-squares scale and shift: argmin_{s,t} sum over valid pixels of (s * pred + t - target)^2.

    pred, target, mask: 'b 1 h w' or 'b h w' (mask bool). Returns (scale 'b', shift 'b').
    The 2x2 normal equations are solved on pred/target centred at their masked means, where they decouple
    (s = cov / var, t = mean_target - s * mean_pred) and float32 does not lose the variance to cancellation.
    Where the system is singular (fewer than two distinct valid pred values, or no valid pixel),
    s = t = 0, like MiDaS' ``compute_scale_and_shift`` with its det > 0 guard.
    """
    pred, target = _squeeze_channel(pred, 'pred'), _squeeze_channel(target, 'target')
    mask = _squeeze_channel(mask, 'mask').bool()
    pred, target = torch.where(mask, pred, 0).flatten(1), torch.where(mask, target, 0).flatten(1)  # b (h w)
    mask = mask.flatten(1)
    n = mask.sum(1).clamp_min(1)  # b
    mean_p, mean_t = pred.sum(1) / n, target.sum(1) / n  # b
    pc = torch.where(mask, pred - mean_p[:, None], 0)  # b (h w)
    tc = torch.where(mask, target - mean_t[:, None], 0)
    var, cov = (pc * pc).sum(1), (pc * tc).sum(1)  # b
    # det of the uncentred system is n * var: singular when pred's spread is round-off of its magnitude
    ok = var > 1e-10 * (pred * pred).sum(1)
    scale = torch.where(ok, cov / torch.where(ok, var, 1), 0)
    shift = torch.where(ok, mean_t - scale * mean_p, 0)
    return scale, shift


def gradient_matching(residual: torch.Tensor, mask: torch.Tensor, scales: int) -> torch.Tensor:
    """MiDaS' multi-scale gradient matching term of a residual 'b h w' (0 where ``mask``, 'b h w' bool, is False):
      sum_k (sum |dx r| + sum |dy r|) / M_k over pixel pairs valid at both ends, at scale k < ``scales``: every
      2**k-th row and column, M_k its valid pixels in the batch (a term with M_k = 0 is 0)."""
    grad = residual.new_zeros(())
    for k in range(scales):
        step = 2 ** k
        r, m = residual[:, ::step, ::step], mask[:, ::step, ::step]  # b h' w'
        grad_x = torch.where(m[:, :, 1:] & m[:, :, :-1], (r[:, :, 1:] - r[:, :, :-1]).abs(), 0)
        grad_y = torch.where(m[:, 1:, :] & m[:, :-1, :], (r[:, 1:, :] - r[:, :-1, :]).abs(), 0)
        grad = grad + (grad_x.sum() + grad_y.sum()) / m.sum().clamp_min(1)
    return grad


class ScaleShiftInvariantLoss(nn.Module):
    """MiDaS' scale-and-shift-invariant loss (Ranftl et al., 2020), batch-based reduction.

    ``forward(pred, target, mask)``: each 'b 1 h w' or 'b h w', mask bool -> scalar.
    pred is aligned per image to target by :func:`align_scale_shift`; with r = aligned - target,
      data = sum over valid pixels of r^2 / (2 M),                      M = valid pixels in the batch;
      grad = sum_k (sum |dx r| + sum |dy r|) / M_k over pixel pairs valid at both ends, at scale k:
             every 2**k-th row and column, M_k its valid pixels (:func:`gradient_matching`);
      loss = loss_weight * (data + alpha * grad), each term 0 where its M is 0.
    """

    def __init__(self, alpha: float = 0.5, scales: int = 4, loss_weight: float = 1.0):
        super().__init__()
        self.alpha, self.scales, self.loss_weight = alpha, scales, loss_weight

    @_in_float32
    def forward(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pred, target = _squeeze_channel(pred, 'pred'), _squeeze_channel(target, 'target')
        mask = _squeeze_channel(mask, 'mask').bool()
        _check_same_shape(pred, target, mask)
        pred, target = torch.where(mask, pred, 0), torch.where(mask, target, 0)
        scale, shift = align_scale_shift(pred, target, mask)
        residual = torch.where(mask, scale[:, None, None] * pred + shift[:, None, None] - target, 0)  # b h w
        data = residual.square().sum() / (2 * mask.sum()).clamp_min(1)
        return self.loss_weight * (data + self.alpha * gradient_matching(residual, mask, self.scales))


class SiLogLoss(nn.Module):
    """Scale-invariant log loss (Eigen et al., 2014) over the batch's valid pixels.

    ``forward(pred, target, mask)``: same shapes, pred positive depth, mask bool -> scalar
      sqrt(mean(d^2) - lambd * mean(d)^2),  d = log(pred + eps) - log(target + eps),
    over pixels with mask & (target > 0). A graph-connected 0 when no pixel is valid; the square root
    of a zero (or round-off negative) variance is 0 with a zero, not NaN, gradient.
    """

    def __init__(self, lambd: float = 0.85, eps: float = 1e-6, loss_weight: float = 1.0):
        super().__init__()
        self.lambd, self.eps, self.loss_weight = lambd, eps, loss_weight

    @_in_float32
    def forward(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        _check_same_shape(pred, target, mask)
        valid = mask.bool() & (target > 0)
        d = torch.log(torch.where(valid, pred, 1) + self.eps) - torch.log(torch.where(valid, target, 1) + self.eps)
        n = valid.sum().clamp_min(1)
        var = d.square().sum() / n - self.lambd * (d.sum() / n).square()
        positive = var > 0
        return self.loss_weight * torch.where(positive, torch.where(positive, var, 1).sqrt(), var * 0)


for _loss in (CrossEntropyLoss, ScaleShiftInvariantLoss, SiLogLoss):
    MODELS.register_module(module=_loss)
