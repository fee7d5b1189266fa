"""EoMT's own parts (Kerssies et al. 2025): the upscaling blocks that bring the patch features to a finer grid, the
MLP that turns query tokens into mask embeddings, and the annealing schedule of the masked attention with the hook
that drives it by the training iteration.

- :class:`UpscaleBlock`: 'b d h w -> b d 2h 2w', a 2x2 stride-2 transposed conv, the activation, a 3x3 depthwise conv
  (no bias) and a LayerNorm over the channels;
- :class:`MaskMLP`: 'b q d -> b q d', three Linears with the activation between them;
- :func:`mask_probability`: the probability that block i's masked attention is on at an iteration: 1 before the
  block's start, ``(1 - progress) ** power`` between start and end, 0 after (the paper's polynomial decay, power
  0.9); :func:`annealing_steps` staggers the blocks' windows over the run (the paper's 4-block recipes: block i
  anneals from (i + 1) / 6 to (i + 2) / 6 of the iterations);
- :class:`MaskAnnealingHook`: sets the model's probabilities before every training iteration from ``runner.iter``
  (the iterations done), as the original code sets them after each step from its global step.
"""
from __future__ import annotations

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from torch import nn

from ..necks.pyramid import LayerNorm2d
from ..registry import HOOKS


class UpscaleBlock(nn.Module):
    """'b d h w -> b d 2h 2w': transposed conv 2x2 stride 2, activation, depthwise 3x3 conv, LayerNorm (eps 1e-6)."""

    def __init__(self, dim: int, act_layer=nn.GELU):
        super().__init__()
        self.conv1 = nn.ConvTranspose2d(dim, dim, kernel_size=2, stride=2)
        self.act = act_layer()
        self.conv2 = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim, bias=False)
        self.norm = LayerNorm2d(dim, eps=1e-6)

    def forward(self, x):
        return self.norm(self.conv2(self.act(self.conv1(x))))


class MaskMLP(nn.Module):
    """'b q d -> b q d': fc1, activation, fc2, activation, fc3 (the query tokens' mask embeddings)."""

    def __init__(self, dim: int, act_layer=nn.GELU):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (nn.Linear(dim, dim) for _ in range(3))
        self.act = act_layer()

    def forward(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


def mask_probability(iteration: int, start: int, end: int, power: float = 0.9) -> float:
    """The probability that a block's masked attention is applied after ``iteration`` iterations: 1 before
    ``start``, 0 from ``end`` on, ``(1 - (iteration - start) / (end - start)) ** power`` between."""
    if iteration < start:
        return 1.0
    if iteration >= end:
        return 0.0
    return (1.0 - (iteration - start) / (end - start)) ** power


def annealing_steps(num_blocks: int, max_iters: int, windows=None) -> list[tuple[int, int]]:
    """Per masked block, its (start, end) iterations: ``windows`` (fractions of ``max_iters``, one (start, end) pair per
    block), or by default block i from (i + 1) / (L + 2) to (i + 2) / (L + 2) of the run (L = ``num_blocks``: the
    paper's 4-block recipes, 1/6 ... 5/6)."""
    if windows is None:
        windows = [((i + 1) / (num_blocks + 2), (i + 2) / (num_blocks + 2)) for i in range(num_blocks)]
    if len(windows) != num_blocks or any(len(w) != 2 or not 0 <= w[0] <= w[1] for w in windows):
        raise ValueError(f"mask annealing windows must be one (start, end) pair of fractions of the run per masked "
                         f"block ({num_blocks}), start <= end, got {windows!r}")
    return [(int(start * max_iters), int(end * max_iters)) for start, end in windows]


@HOOKS.register_module()
class MaskAnnealingHook(Hook):
    """Before each training iteration, the model's per-block probabilities of masked attention
    (``attn_mask_probs``) from the iterations done (``runner.iter``) by :func:`mask_probability` over
    :func:`annealing_steps` (``windows``: fractions of ``max_iters``; ``power``: the decay's exponent). Evaluation
    after the last window runs without masks, as the paper's models do."""
    priority = 'NORMAL'

    def __init__(self, windows=None, power: float = 0.9):
        self.windows, self.power = windows, power

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not hasattr(model, 'set_mask_probabilities'):
            raise TypeError(f"MaskAnnealingHook anneals the masked attention of an EoMT model, but the runner's model "
                            f"is a {type(model).__name__}: remove the hook from custom_hooks")
        steps = annealing_steps(len(model.attn_mask_probs), runner.max_iters, self.windows)
        model.set_mask_probabilities([mask_probability(runner.iter, start, end, self.power) for start, end in steps])
