"""From one image's query predictions (class logits 'q c+1', mask logits 'q h w') to semantic, instance and
panoptic results, as Mask2Former (detectron2) and EoMT infer them.

- semantic: class scores 'c h w' = sum over queries of softmax class probabilities (no-object dropped) times
  sigmoid mask probabilities;
- instance: the ``top_k`` best (query, class) pairs over all queries and classes, each scored by its class
  probability times its mask's mean sigmoid probability inside the mask (logit > 0), masks binarised at logit 0;
- panoptic: queries whose best class is not no-object with probability above ``object_threshold`` compete for the
  pixels (each pixel to the query of largest probability x mask probability); a query keeps its pixels that also
  have mask probability >= ``mask_threshold`` if it won more than ``overlap_threshold`` of its own mask (probability
  >= ``mask_threshold``), else it is dropped; segments of one stuff class are merged. The map packs
  ``label + instance * INSTANCE_OFFSET`` (things numbered from 0 in query order, stuff instance 0), pixels of no
  segment are ``num_classes``.

Panoptic inference follows detectron2's Mask2Former and transformers' ``EomtImageProcessor`` (its tests compare
with the latter; a query is kept when its won share is strictly above the threshold, as there).
``Mask2FormerImageProcessor`` differs: a segment keeps all the pixels it wins, also those below the mask threshold,
and the share is measured on score-weighted probabilities.
"""
from __future__ import annotations

import torch

from ..io.labels import INSTANCE_OFFSET


def _same(x: torch.Tensor) -> torch.Tensor:
    return x


def semantic_scores(class_logits: torch.Tensor, mask_logits: torch.Tensor) -> torch.Tensor:
    """'q c+1', 'q h w' -> 'c h w'."""
    probs = class_logits.softmax(-1)[:, :-1]
    return torch.einsum('qc,qhw->chw', probs, mask_logits.sigmoid())


def instance_results(class_logits: torch.Tensor, mask_logits: torch.Tensor, top_k: int | None = None,
                     score_threshold: float = 0.0, stuff_classes=(), to_output=None):
    """'q c+1', 'q h w' -> masks 'k H W' (bool), labels 'k' (int64), scores 'k', best first; ``top_k`` (default:
    the number of queries) pairs, then those with score >= ``score_threshold`` and a class not among
    ``stuff_classes`` (detectron2 drops stuff from the top-k when it also infers panoptic maps). ``to_output``:
    'n h w -> n H W', applied to the chosen queries' logits only (the resizing to the image; default none)."""
    q, classes = class_logits.shape[0], class_logits.shape[1] - 1
    probs = class_logits.softmax(-1)[:, :-1].flatten()  # (q c)
    top, index = probs.topk(min(top_k or q, len(probs)))
    query, labels = index // classes, index % classes
    chosen, where = query.unique(return_inverse=True)
    logits = (to_output or _same)(mask_logits[chosen])[where]  # k H W
    masks = logits > 0
    mask_score = (logits.sigmoid() * masks).flatten(1).sum(1) / (masks.flatten(1).sum(1) + 1e-6)
    scores = top * mask_score
    order = scores.argsort(descending=True)
    order = order[scores[order] >= score_threshold]
    if len(stuff_classes):
        order = order[~torch.isin(labels[order], torch.as_tensor(list(stuff_classes), device=labels.device))]
    return masks[order], labels[order], scores[order]


def panoptic_map(class_logits: torch.Tensor, mask_logits: torch.Tensor, object_threshold: float = 0.8,
                 mask_threshold: float = 0.5, overlap_threshold: float = 0.8, stuff_classes=(),
                 to_output=None) -> tuple[torch.Tensor, list[dict]]:
    """'q c+1', 'q h w' -> the packed map '1 H W' (int64) and its segments: dicts with ``id`` (the packed
    value), ``label``, ``score``, ``query``, ``isthing``. ``to_output``: 'n h w -> n H W', applied to the kept
    queries' logits only (the resizing to the image; default none)."""
    num_classes = class_logits.shape[1] - 1
    scores, labels = class_logits.softmax(-1).max(-1)
    keep = (labels != num_classes) & (scores > object_threshold)
    queries = keep.nonzero().flatten()
    to_output = to_output or _same
    probs = to_output(mask_logits[queries]).sigmoid() if len(queries) else to_output(mask_logits[:1])[:0]  # k H W
    panoptic = torch.full(probs.shape[-2:], num_classes, dtype=torch.int64, device=mask_logits.device)
    segments, stuff_ids, things = [], {}, 0
    if len(queries) == 0:
        return panoptic[None], segments
    owner = (scores[queries, None, None] * probs).argmax(0)  # h w
    stuff_classes = set(int(c) for c in stuff_classes or ())
    for k, query in enumerate(queries.tolist()):
        label = int(labels[query])
        won, own = owner == k, probs[k] >= mask_threshold
        won_area, own_area, mask = int(won.sum()), int(own.sum()), won & own
        if won_area == 0 or own_area == 0 or not mask.any() or not won_area / own_area > overlap_threshold:
            continue
        if label in stuff_classes:
            if label in stuff_ids:
                panoptic[mask] = stuff_ids[label]
                continue
            stuff_ids[label] = value = label
        else:
            value, things = label + things * INSTANCE_OFFSET, things + 1
        panoptic[mask] = value
        segments.append(dict(id=value, label=label, score=float(scores[query]), query=query,
                             isthing=label not in stuff_classes))
    return panoptic[None], segments
