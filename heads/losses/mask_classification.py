"""Mask2Former's training loss for mask classification (also EoMT's): Hungarian matching, then per layer

    class_weight * CE(class logits, matched labels; unmatched queries -> no-object, weighted no_object_weight)
    + mask_weight * sigmoid-CE(matched mask logits, target masks) + dice_weight * dice(...)

The mask terms are read on ``num_points`` points per matched mask, chosen by uncertainty (importance sampling):
``num_points * oversample_ratio`` uniform points, of which the ``importance_sample_ratio * num_points`` with the
logit nearest 0 are kept, and the rest of the ``num_points`` drawn uniformly anew. Both mask terms are summed over
the matched masks and divided by the number of target masks in the batch (averaged over the processes of a
distributed run, at least 1). Random numbers are drawn in the order transformers' ``Mask2FormerLoss`` (the same
as ``EomtLoss``) draws them: per layer the matcher's points image by image, then the uncertainty candidates and
the uniform points, so that a seeded run gives the same values.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..registry import MODELS
from .mask_matching import MaskMatcher, sample_points


def uncertain_points(mask_logits: torch.Tensor, num_points: int, oversample_ratio: float,
                     importance_sample_ratio: float) -> torch.Tensor:
    """Points 'n p 2' ((x, y) in [0, 1]) for 'n h w' mask logits: the most uncertain (|logit| smallest) of
    ``int(num_points * oversample_ratio)`` uniform candidates, ``int(importance_sample_ratio * num_points)`` of
    them, then uniform points up to ``num_points``."""
    n, candidates = len(mask_logits), int(num_points * oversample_ratio)
    uncertain = int(importance_sample_ratio * num_points)
    points = torch.rand(n, candidates, 2, device=mask_logits.device)
    uncertainty = -sample_points(mask_logits, points).abs()  # n candidates
    chosen = uncertainty.topk(uncertain, dim=1).indices  # n uncertain
    points = points.gather(1, chosen[..., None].expand(-1, -1, 2))
    if num_points > uncertain:
        points = torch.cat([points, torch.rand(n, num_points - uncertain, 2, device=mask_logits.device)], dim=1)
    return points


def dice_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per mask ``1 - (2 |x y| + 1) / (|x| + |y| + 1)``, x the sigmoid of 'n p' logits: -> 'n'."""
    probs = logits.sigmoid()
    return 1 - (2 * (probs * targets).sum(-1) + 1) / (probs.sum(-1) + targets.sum(-1) + 1)


def count_masks(labels: list[torch.Tensor], device) -> torch.Tensor:
    """The batch's number of target masks, averaged over the processes of a distributed run, at least 1."""
    count = torch.tensor(float(sum(len(x) for x in labels)), device=device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(count)
        count = count / dist.get_world_size()
    return count.clamp(min=1)


@MODELS.register_module()
class MaskClassificationLoss(nn.Module):
    """The matched class and point-sampled mask losses of one or several layers' predictions (module docstring).

    ``forward(layers, labels, masks)``: ``layers`` a list of ``(suffix, class_logits 'b q c+1', mask_logits
    'b q h w')`` in the order they are computed (the random points follow that order); ``labels`` per image 'n'
    int64 in [0, num_classes); ``masks`` per image 'n H W' (0/1, any size: points are read in normalised
    coordinates, so predictions and targets must cover the same image area). Returns ``loss_cls{suffix}``,
    ``loss_mask{suffix}``, ``loss_dice{suffix}``, each already multiplied by its weight. Matching costs default to
    the loss weights, as transformers sets them."""

    def __init__(self, num_classes: int, class_weight: float = 2.0, mask_weight: float = 5.0,
                 dice_weight: float = 5.0, no_object_weight: float = 0.1, num_points: int = 12544,
                 oversample_ratio: float = 3.0, importance_sample_ratio: float = 0.75, cost_class: float | None = None,
                 cost_mask: float | None = None, cost_dice: float | None = None):
        super().__init__()
        if not 0 <= importance_sample_ratio <= 1 or oversample_ratio < 1:
            raise ValueError(f"MaskClassificationLoss needs 0 <= importance_sample_ratio <= 1 and oversample_ratio "
                             f">= 1, got {importance_sample_ratio} and {oversample_ratio}")
        self.num_classes = num_classes
        self.class_weight, self.mask_weight, self.dice_weight = class_weight, mask_weight, dice_weight
        self.num_points, self.oversample_ratio = num_points, oversample_ratio
        self.importance_sample_ratio = importance_sample_ratio
        weight = torch.ones(num_classes + 1)
        weight[-1] = no_object_weight
        self.register_buffer('class_weights', weight, persistent=False)
        self.matcher = MaskMatcher(class_weight if cost_class is None else cost_class,
                                   mask_weight if cost_mask is None else cost_mask,
                                   dice_weight if cost_dice is None else cost_dice, num_points)

    def check_targets(self, labels: list[torch.Tensor], masks: list[torch.Tensor]) -> None:
        for i, (label, mask) in enumerate(zip(labels, masks)):
            if label.ndim != 1 or mask.ndim != 3 or len(label) != len(mask):
                raise ValueError(f"target {i}: labels must be 'n' and masks 'n h w' with the same n, got "
                                 f"{tuple(label.shape)} and {tuple(mask.shape)}")
            if len(label) and (label.min() < 0 or label.max() >= self.num_classes):
                raise ValueError(f"target {i}: labels must be in [0, {self.num_classes}) (num_classes), got "
                                 f"{label.min().item()}..{label.max().item()}; set num_classes to the dataset's")

    def class_loss(self, class_logits: torch.Tensor, labels: list[torch.Tensor], matches) -> torch.Tensor:
        """Weighted cross-entropy over all queries: matched ones against their target's label, the others
        against no-object (index ``num_classes``)."""
        b, q, _ = class_logits.shape
        target = torch.full((b, q), self.num_classes, dtype=torch.int64, device=class_logits.device)
        for image, (rows, cols) in enumerate(matches):
            target[image, rows.to(target.device)] = labels[image][cols.to(labels[image].device)].to(target.device)
        return F.cross_entropy(class_logits.float().transpose(1, 2), target, weight=self.class_weights)

    def mask_losses(self, mask_logits: torch.Tensor, masks: list[torch.Tensor], matches, count: torch.Tensor):
        """Point-sampled sigmoid-CE and dice of matched masks, each summed and divided by ``count``."""
        images = torch.cat([torch.full_like(rows, image) for image, (rows, _) in enumerate(matches)])
        queries = torch.cat([rows for rows, _ in matches])
        pred = mask_logits[images.to(mask_logits.device), queries.to(mask_logits.device)].float()  # m h w
        with torch.no_grad():
            points = uncertain_points(pred, self.num_points, self.oversample_ratio, self.importance_sample_ratio)
            target_points = torch.cat(list(self.target_values(masks, matches, points))).to(pred.device)  # m p
        pred_points = sample_points(pred, points)  # m p
        sigmoid_ce = F.binary_cross_entropy_with_logits(pred_points, target_points, reduction='none').mean(1)
        return sigmoid_ce.sum() / count, dice_loss(pred_points, target_points).sum() / count

    @staticmethod
    def target_values(masks: list[torch.Tensor], matches, points: torch.Tensor):
        """Per image the matched target masks' values 'k p' at their points (``points`` 'm p 2' in match order),
        read from the image's 'n H W' masks in place (each target gets its points; no copy of the masks)."""
        start = 0
        for image, (_, cols) in enumerate(matches):
            target = masks[image]
            cols = cols.to(target.device)
            per_target = points.new_zeros(len(target), points.shape[1], 2).to(target.device)  # n p 2
            per_target[cols] = points[start:start + len(cols)].to(target.device)
            start += len(cols)
            yield sample_points(target, per_target)[cols]

    def forward(self, layers, labels: list[torch.Tensor], masks: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        self.check_targets(labels, masks)
        masks = [m.float() for m in masks]  # once for every layer (the matcher and the mask losses read them)
        device = layers[0][1].device
        count = count_masks(labels, device)
        losses = {}
        with torch.autocast(device_type=device.type, enabled=False):
            for suffix, class_logits, mask_logits in layers:
                matches = self.matcher(class_logits, mask_logits, labels, masks)
                loss_mask, loss_dice = self.mask_losses(mask_logits, masks, matches, count)
                losses[f'loss_cls{suffix}'] = self.class_weight * self.class_loss(class_logits, labels, matches)
                losses[f'loss_mask{suffix}'] = self.mask_weight * loss_mask
                losses[f'loss_dice{suffix}'] = self.dice_weight * loss_dice
        return losses
