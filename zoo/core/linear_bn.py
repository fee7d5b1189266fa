"""Linear layers paired with BatchNorm over tokens (LeViT's habit), folded into one Linear when the BN statistics
are frozen.

- :class:`LinearBN`: 'b n c -> b n d', Linear (no bias) then BatchNorm1d over all b*n tokens;
- :class:`BNLinear`: 'b c -> b d', BatchNorm1d then Linear (LeViT's classifier head).

In eval (running statistics in use) each runs as a single ``F.linear`` whose weight and bias absorb the BN,
with bn(y) = y * s + t, s = gamma / sqrt(var + eps), t = beta - mean * s:
  LinearBN:  W' = s[:, None] * W,  b' = t;
  BNLinear:  W' = W * s[None, :],  b' = W @ t + b.
Same values, one pass over the tokens fewer; in inference the folded pair is kept until a weight or statistic
changes. Keys ``linear`` and ``norm`` (as :class:`zoo.core.ConvBN`'s
``conv`` and ``norm``).
"""
from __future__ import annotations

import torch
from torch import nn

from ..runtime.gemm import linear
from .conv_bn import bn_affine


def _uses_batch_stats(bn: nn.BatchNorm1d) -> bool:
    return bn.training or bn.running_var is None


class _FoldCache(nn.Module):
    """Keeps the folded (weight, bias) between inference calls, until a tensor it is folded from changes; with
    autograd recording (or in training) nothing is kept.

    The cache key is read from exactly the tensors :meth:`folded` reads (:meth:`fold_inputs`: the Linear's and the
    BN's, named directly rather than gathered by a walk over the module tree, which cost more than the folded
    product itself at LeViT's token counts)."""

    def __init__(self):
        super().__init__()
        self._folded: tuple | None = None

    def folded(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def fold_inputs(self) -> list[torch.Tensor]:
        """The tensors :meth:`folded` reads: the Linear's weight and bias, the BN's affine and running statistics."""
        linear, norm = self.linear, self.norm
        tensors = (linear.weight, linear.bias, norm.weight, norm.bias, norm.running_mean, norm.running_var)
        return [t for t in tensors if t is not None]

    def cached_folded(self) -> tuple[torch.Tensor, torch.Tensor]:
        tensors = self.fold_inputs()
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            self._folded = None
            return self.folded()
        # a new device or dtype is new storage: its address differs from the cached one's while that is alive
        key = (*(t._version for t in tensors), *(t.data_ptr() for t in tensors), torch.is_inference_mode_enabled())
        if self._folded is None or self._folded[0] != key:
            self._folded = (key, self.folded())
        return self._folded[1]


class LinearBN(_FoldCache):
    """'b ... c -> b ... d': Linear without bias, then BatchNorm1d over every token of the batch.

    ``bn_weight_init`` sets the BN's initial gamma (0 makes a residual branch start as the identity, as LeViT's
    output projections do).
    """

    def __init__(self, in_dim: int, out_dim: int, bn_weight_init: float = 1.0):
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim, bias=False)
        self.norm = nn.BatchNorm1d(out_dim)
        nn.init.constant_(self.norm.weight, bn_weight_init)

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    def folded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The Linear weight and bias equivalent to Linear -> BN with the running statistics."""
        scale, shift = bn_affine(self.norm)
        return self.linear.weight * scale[:, None], shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _uses_batch_stats(self.norm):
            y = self.linear(x)
            return self.norm(y.flatten(0, -2)).view_as(y)  # statistics over all tokens: '(b n) d'
        weight, bias = self.cached_folded()
        return linear(x, weight.to(x.dtype), bias.to(x.dtype))


class BNLinear(_FoldCache):
    """'b c -> b d': BatchNorm1d, optional dropout, then Linear (with bias)."""

    def __init__(self, in_dim: int, out_dim: int, drop: float = 0.0):
        super().__init__()
        self.norm = nn.BatchNorm1d(in_dim)
        self.drop = nn.Dropout(drop) if drop else nn.Identity()
        self.linear = nn.Linear(in_dim, out_dim)
        nn.init.trunc_normal_(self.linear.weight, std=0.02)
        nn.init.zeros_(self.linear.bias)

    def folded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The Linear weight and bias equivalent to BN -> Linear with the running statistics."""
        scale, shift = bn_affine(self.norm)
        return self.linear.weight * scale[None, :], self.linear.weight @ shift + self.linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _uses_batch_stats(self.norm) or self.training:
            return self.linear(self.drop(self.norm(x)))
        weight, bias = self.cached_folded()
        return linear(x, weight.to(x.dtype), bias.to(x.dtype))
