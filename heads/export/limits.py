"""Parts of a model that no export with a dynamic input size reproduces exactly: an export containing one is refused
with the reason before tracing (never written for one size only, nor written inexact)."""
from __future__ import annotations

from torch import nn

from zoo.core.pos_embed import LearnedPosEmbed


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
    return reasons


def refuse_inexact(module: nn.Module, name: str) -> None:
    """A ValueError naming every :func:`inexact_parts` of ``module`` (the model ``name``), if any."""
    reasons = inexact_parts(module)
    if reasons:
        raise ValueError(f"{name} cannot be exported with a dynamic input size exactly; refused: "
                         + '; '.join(reasons))
