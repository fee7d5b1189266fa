"""Video Depth Anything's training loss (Chen et al., CVPR 2025; the authors' ``VideoDepthLoss`` in
DepthAnything/Video-Depth-Anything ``loss/loss.py``): a spatial term per frame and a temporal term over each clip.

- spatial (their ``TrimmedProcrustesLoss``): prediction and target each normalised per frame by
  :func:`robust_normalize` (minus a median, over a mean absolute deviation); on the residual r of the two, the
  trimmed mean absolute error :func:`trimmed_mae` plus ``alpha`` x MiDaS' multi-scale gradient matching
  (:func:`~heads.losses.dense.gradient_matching`).
- temporal (their ``TemporalGradientMatchingLoss``): the prediction fitted to the target by one least-squares scale
  and shift per clip (:func:`~heads.losses.dense.align_scale_shift` over all its frames), then
  :func:`temporal_gradient_matching`: the trimmed mean absolute error between the frame-to-frame changes of
  prediction and target, over pixels valid in both frames whose target changes by less than ``temporal_threshold``
  x the later frame's target range (a jump there is motion or an occlusion edge, not flicker). Weighted by
  ``temporal_weight`` (their ``stable_scale``, 10).

Every reduction is batch-based: sums over the batch's valid pixels divided by their count. Inputs are 'b t h w'
(``mask`` bool); invalid pixels are removed with ``torch.where`` (:mod:`.dense`'s conventions: float32, garbage
under the mask reaches neither value nor gradient, graph-connected zeros).
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from ..registry import MODELS
from .dense import _check_same_shape, _in_float32, align_scale_shift, gradient_matching


def robust_normalize(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per image '(b h w)': (x - m) / s, m the median of the image with its invalid pixels counted as 0 (as the
    authors' ``normalize_prediction_robust`` takes it, not the median of the valid pixels alone; the lower middle
    value for an even count, ``torch.median``'s), s the mean |x - m| over the valid pixels, at least 1e-6. An image
    without a valid pixel keeps m = 0, s = 1. ``x`` must be 0 where ``mask`` is False."""
    valid = mask.sum((1, 2))  # b
    some = valid > 0
    m = torch.where(some, x.flatten(1).median(dim=1).values, 0)  # b
    centred = x - m[:, None, None]
    s = torch.where(mask, centred.abs(), 0).sum((1, 2)) / valid.clamp_min(1)
    s = torch.where(some, s.clamp_min(1e-6), 1)
    return centred / s[:, None, None]


def trimmed_mae(residual: torch.Tensor, mask: torch.Tensor, trim: float = 0.0) -> torch.Tensor:
    """Trimmed mean absolute error, batch-based: the sum of the smallest ``int(n * (1 - trim))`` of the n valid
    |residual| values of the whole batch, divided by n (all of them, as the authors' ``TrimmedMAELoss``). A
    graph-connected 0 when nothing is kept."""
    values = residual[mask].abs()
    keep = int(values.numel() * (1.0 - trim))
    if keep <= 0:
        return residual.sum() * 0
    if keep < values.numel():
        values = values.sort().values[:keep]
    return values.sum() / mask.sum()


def temporal_gradient_matching(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, trim: float = 0.0,
                               scales: int = 1, decay: float = 0.5, threshold: float = 0.05) -> torch.Tensor:
    """The authors' ``TemporalGradientMatchingLoss`` on 'b t h w' (``mask`` bool, pred and target 0 where it is
    False): at each frame stride 2**k < t (k < ``scales``), :func:`trimmed_mae` of d_t pred - d_t target between the
    strided frames, over pixels valid in both whose |d_t target| is below ``threshold`` x the later frame's valid
    target range (max - min), weighted by ``decay``**k; the mean over the strides used. A clip of one frame has no
    stride: a graph-connected 0."""
    lowest = torch.where(mask, target, torch.inf).amin((-2, -1))  # b t (inf, -inf for a frame without valid pixel)
    highest = torch.where(mask, target, -torch.inf).amax((-2, -1))
    limit = (highest - lowest) * threshold  # b t
    total, used = pred.new_zeros(()), 0
    for k in range(scales):
        stride = 2 ** k
        if stride >= pred.shape[1]:
            break
        p, g, m, lim = pred[:, ::stride], target[:, ::stride], mask[:, ::stride], limit[:, ::stride]
        dp, dg = p.diff(dim=1), g.diff(dim=1)  # b t' h w
        valid = m[:, 1:] & m[:, :-1] & (dg.abs() < lim[:, 1:, None, None])
        total = total + trimmed_mae(dp - dg, valid, trim) * decay ** k
        used += 1
    return total / used if used else pred.sum() * 0


class VideoDepthLoss(nn.Module):
    """The authors' ``VideoDepthLoss`` (module docstring) with their defaults: ``alpha`` 0.5, gradient ``scales`` 4,
    ``trim`` 0 (both terms), ``temporal_weight`` 10, one temporal stride (``temporal_scales`` 1, ``temporal_decay``
    0.5), ``temporal_threshold`` 0.05.

    ``forward(pred, target, mask)``: 'b t h w' each (whole clips; relative disparity, the prediction of a relative
    head), mask bool -> ``loss_weight`` x (spatial + temporal); :meth:`terms` gives the two apart. ``clip_loss``
    tells :class:`~heads.models.video_depth_anything.VideoDepthEstimator` to hand it clips rather than frames.
    """

    clip_loss = True

    def __init__(self, alpha: float = 0.5, scales: int = 4, trim: float = 0.0, temporal_weight: float = 10.0,
                 temporal_scales: int = 1, temporal_decay: float = 0.5, temporal_threshold: float = 0.05,
                 loss_weight: float = 1.0):
        super().__init__()
        if not 0.0 <= trim < 1.0:
            raise ValueError(f"trim is the fraction of the largest residuals left out, in [0, 1); got {trim}")
        self.alpha, self.scales, self.trim = alpha, scales, trim
        self.temporal_weight, self.temporal_scales = temporal_weight, temporal_scales
        self.temporal_decay, self.temporal_threshold = temporal_decay, temporal_threshold
        self.loss_weight = loss_weight

    @_in_float32
    def terms(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """{'spatial': ..., 'temporal': ...} (each times ``loss_weight``, the temporal one times
        ``temporal_weight``) for clips 'b t h w'."""
        if pred.ndim != 4:
            raise ValueError(f"VideoDepthLoss takes clips 'b t h w', got pred of shape {tuple(pred.shape)}")
        mask = mask.bool()
        _check_same_shape(pred, target, mask)
        pred, target = torch.where(mask, pred, 0), torch.where(mask, target, 0)
        frames = lambda x: rearrange(x, 'b t h w -> (b t) h w')  # noqa: E731
        m = frames(mask)
        residual = torch.where(m, robust_normalize(frames(pred), m) - robust_normalize(frames(target), m), 0)
        spatial = trimmed_mae(residual, m, self.trim)
        if self.alpha > 0:
            spatial = spatial + self.alpha * gradient_matching(residual, m, self.scales)
        clips = lambda x: rearrange(x, 'b t h w -> b (t h) w')  # noqa: E731
        scale, shift = align_scale_shift(clips(pred), clips(target), clips(mask))  # b
        aligned = torch.where(mask, scale[:, None, None, None] * pred + shift[:, None, None, None], 0)
        temporal = temporal_gradient_matching(aligned, target, mask, self.trim, self.temporal_scales,
                                              self.temporal_decay, self.temporal_threshold)
        return dict(spatial=self.loss_weight * spatial,
                    temporal=self.loss_weight * self.temporal_weight * temporal)

    def forward(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        spatial, temporal = self.terms(pred, target, mask).values()
        return spatial + temporal


MODELS.register_module(module=VideoDepthLoss)
