"""Hungarian matching of mask-classification queries to target masks (Mask2Former's matcher).

Each image's cost of giving target ``t`` to query ``q`` is

    cost_class * -p_q(label_t) + cost_mask * BCE(m_q, M_t) + cost_dice * dice(m_q, M_t)

with ``p_q`` the softmax over the query's 'c+1' class logits, and the sigmoid cross-entropy (mean over points) and
dice loss computed on ``num_points`` points drawn uniformly in the unit square, the same points for every query and
every target (predicted mask logits and target masks are read there by bilinear sampling, so the two may have
different resolutions). scipy's ``linear_sum_assignment`` then picks one query per target (queries outnumber
targets). Points are drawn with ``torch.rand(1, num_points, 2)`` per image, in batch order, as transformers'
``Mask2FormerHungarianMatcher`` draws them, so a seeded run matches its indices exactly.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.resize import NONDETERMINISTIC_BACKWARD


def sample_points(maps: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Bilinear values of ``maps`` 'n h w' at ``points`` 'n p 2' ((x, y) in [0, 1], pixel-area convention,
    ``grid_sample`` with ``align_corners=False`` and zeros outside) -> 'n p'. Under deterministic algorithms on a
    device whose ``grid_sample`` backward is not deterministic (CUDA), a map that needs a gradient is read by
    :func:`gather_points` instead (same values; ``gather``'s backward is deterministic there)."""
    if (maps.requires_grad and torch.is_grad_enabled() and maps.device.type in NONDETERMINISTIC_BACKWARD
            and torch.are_deterministic_algorithms_enabled()):
        return gather_points(maps, points)
    grid = (2.0 * points - 1.0).unsqueeze(2).to(maps.dtype)  # n p 1 2
    return F.grid_sample(maps.unsqueeze(1), grid, align_corners=False).squeeze(3).squeeze(1)


def gather_points(maps: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """:func:`sample_points` by gathering the four neighbouring pixels: 'n h w', 'n p 2' -> 'n p'."""
    n, h, w = maps.shape
    x = points[..., 0].to(maps.dtype) * w - 0.5  # n p, pixel coordinates (pixel centres at integers)
    y = points[..., 1].to(maps.dtype) * h - 0.5
    x0, y0 = x.floor(), y.floor()
    flat = maps.reshape(n, h * w)
    out = maps.new_zeros(points.shape[:2])
    for xi in (x0, x0 + 1):
        for yi in (y0, y0 + 1):
            weight = (1 - (x - xi).abs()) * (1 - (y - yi).abs())
            inside = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
            index = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).long()
            out = out + flat.gather(1, index) * weight * inside
    return out


def pairwise_sigmoid_ce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over points of every prediction against every target: 'q p', 't p' -> 'q t'.

    BCE(x, y) = y * softplus(-x) + (1 - y) * softplus(x)."""
    points = logits.shape[1]
    positive, negative = F.softplus(-logits), F.softplus(logits)
    return (positive @ targets.T + negative @ (1 - targets).T) / points


def pairwise_dice(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Dice loss ``1 - (2 |x y| + 1) / (|x| + |y| + 1)`` of every sigmoid prediction against every target:
    'q p', 't p' -> 'q t'."""
    probs = logits.sigmoid()
    overlap = 2 * probs @ targets.T
    total = probs.sum(-1)[:, None] + targets.sum(-1)[None, :]
    return 1 - (overlap + 1) / (total + 1)


class MaskMatcher(nn.Module):
    """One-to-one assignment of queries to targets per image, minimising the weighted cost (module docstring).

    Call with ``class_logits`` 'b q c+1', ``mask_logits`` 'b q h w' and per image ``labels`` 'n' (int64) and
    ``masks`` 'n H W' (0/1); returns per image ``(query_index, target_index)``, int64 'min(q, n)' each, the query
    indices in increasing order (scipy's order)."""

    def __init__(self, cost_class: float = 2.0, cost_mask: float = 5.0, cost_dice: float = 5.0,
                 num_points: int = 12544):
        super().__init__()
        if cost_class == 0 and cost_mask == 0 and cost_dice == 0:
            raise ValueError("MaskMatcher needs at least one non-zero cost weight (cost_class, cost_mask, cost_dice)")
        self.cost_class, self.cost_mask, self.cost_dice = cost_class, cost_mask, cost_dice
        self.num_points = num_points

    @torch.no_grad()
    def cost_matrix(self, class_logits: torch.Tensor, mask_logits: torch.Tensor, labels: torch.Tensor,
                    masks: torch.Tensor) -> torch.Tensor:
        """One image's cost: 'q c+1', 'q h w', 'n', 'n H W' -> 'q n' (float32; nan and inf made the largest
        float, so that such pairs are chosen last)."""
        class_logits, mask_logits = class_logits.float(), mask_logits.float()
        points = torch.rand(1, self.num_points, 2, device=mask_logits.device)
        pred = sample_points(mask_logits, points.expand(len(mask_logits), -1, -1))  # q p
        target = sample_points(masks.float(), points.expand(len(masks), -1, -1))  # n p
        cost = (self.cost_class * -class_logits.softmax(-1)[:, labels]
                + self.cost_mask * pairwise_sigmoid_ce(pred, target)
                + self.cost_dice * pairwise_dice(pred, target))
        largest = torch.finfo(cost.dtype).max
        return torch.nan_to_num(cost, nan=largest, posinf=largest, neginf=largest)

    @torch.no_grad()
    def forward(self, class_logits: torch.Tensor, mask_logits: torch.Tensor, labels: list[torch.Tensor],
                masks: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        from scipy.optimize import linear_sum_assignment
        matches = []
        for image in range(len(class_logits)):
            cost = self.cost_matrix(class_logits[image], mask_logits[image], labels[image], masks[image])
            rows, cols = linear_sum_assignment(cost.cpu().numpy())
            matches.append((torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)))
        return matches
