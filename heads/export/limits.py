"""Parts of a model that no export with a dynamic input size reproduces exactly: an export containing one is refused
with the reason before tracing (never written for one size only, nor written inexact)."""
from __future__ import annotations

from torch import nn

from zoo.core.pos_embed import LearnedPosEmbed

from ..models.eomt import EoMT


def inexact_parts(module: nn.Module) -> list[str]:
    """One line per part of ``module`` that a dynamic-size export cannot reproduce exactly, saying why."""
    reasons = []
    for name, part in module.named_modules():
        if isinstance(part, LearnedPosEmbed) and part.mode == 'dinov2':
            reasons.append(f"{name}: the 'dinov2' position resampling (bicubic at scale factors (new + 0.1) / old, "
                           f"as the official DINOv2 / Depth Anything code) has no dynamic-size form: the exported "
                           f"resize samples at the sizes' ratio (ONNX Resize, torch 2.14's translation ignores the "
                           f"scales), so its output size and positions would be the traced ones; build the backbone "
                           f"with pos_interp='bicubic' to export (a slightly different table), or run it in PyTorch")
        if isinstance(part, EoMT) and any(0 < p < 1 for p in part.attn_mask_probs.tolist()):
            reasons.append(f"{name or 'the model'}: EoMT's masked attention with probabilities "
                           f"{part.attn_mask_probs.tolist()} masks each query at random (rand > p) in evaluation too; "
                           f"no graph reproduces those draws: export a model whose annealing has ended "
                           f"(probabilities 0, plain attention, as after training) or with probabilities 1 "
                           f"(set_mask_probabilities)")
    return reasons


def refuse_inexact(module: nn.Module, name: str) -> None:
    """A ValueError naming every :func:`inexact_parts` of ``module`` (the model ``name``), if any."""
    reasons = inexact_parts(module)
    if reasons:
        raise ValueError(f"{name} cannot be exported with a dynamic input size exactly; refused: "
                         + '; '.join(reasons))
