"""Convolutional patch (token) embedding: images to a grid of tokens.

A checkpoint's patch kernel of another size (e.g. DINOv2's 14x14 into a 16-pixel-patch model, as EoMT builds it)
is resampled at load (:meth:`PatchEmbed.resample_checkpoint`) by FlexiViT's pseudo-inverse resize (Beyer et al.
2023, timm's ``resample_patch_embed``): with R the bicubic, antialiased resize of a p x p tile to P x P as a matrix
'(P P) (p p)', the new kernel is ``pinv(R^T) w``: for a larger patch (P >= p) the least-norm kernel whose response
to every resized tile equals the old kernel's response to the tile (for a smaller one, the least-squares fit).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def resize_matrix(old: tuple[int, int], new: tuple[int, int]) -> torch.Tensor:
    """R '(new_h new_w) (old_h old_w)' (float64): the bicubic, antialiased resize of an ``old`` tile to ``new``,
    column j the resized j-th unit tile."""
    n = old[0] * old[1]
    units = torch.eye(n, dtype=torch.float32).reshape(n, 1, *old)
    resized = F.interpolate(units, size=tuple(new), mode='bicubic', antialias=True, align_corners=False)
    return resized.reshape(n, -1).T.double()


def resample_patch_kernel(weight: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A conv kernel 'o c p q' resampled to 'o c P Q' (``size``) by the pseudo-inverse resize (module docstring)."""
    old = tuple(weight.shape[-2:])
    if old == tuple(size):
        return weight
    inverse = torch.linalg.pinv(resize_matrix(old, size).T)  # '(P Q) (p q)'
    out = weight.double().flatten(2) @ inverse.T  # 'o c (p q)' -> 'o c (P Q)'
    return out.reshape(*weight.shape[:2], *size).to(weight.dtype)


class PatchEmbed(nn.Module):
    """'b c H W -> b (h w) d' with one conv, returning the tokens and their grid (h, w).

    ``kernel = stride = patch_size`` (ViT's non-overlapping patches) unless ``stride``/``padding`` are
    given (overlapping conv token embedding, e.g. CvT's 7x7 stride 4 pad 2). ``proj`` replaces the conv by
    a module that maps each ``patch_size`` tile to one token all the same (CrossViT's multi-conv stem).
    """

    def __init__(self, patch_size: int = 16, in_chans: int = 3, embed_dim: int = 768, *,
                 stride: int | None = None, padding: int = 0, bias: bool = True, norm_layer=None,
                 proj: nn.Module | None = None):
        super().__init__()
        self.patch_size = patch_size
        self.stride = patch_size if stride is None else stride
        self.padding = padding
        self.in_chans = in_chans
        self.proj = proj if proj is not None else nn.Conv2d(in_chans, embed_dim, patch_size, self.stride, padding,
                                                            bias=bias)
        self.norm = norm_layer(embed_dim) if norm_layer else nn.Identity()

    checkpoint_key = 'proj.weight'  # the parameter load_pretrained resizes with resample_checkpoint

    def resample_checkpoint(self, weight: torch.Tensor) -> torch.Tensor:
        """A checkpoint's patch kernel 'd c p p' of another patch size, resampled to this module's (module
        docstring). Only the kernel size of a plain non-overlapping conv is adapted: a kernel of other channels, or
        for another kind of embedding, comes back as it is (and is reported as a shape mismatch)."""
        conv = self.proj
        if not (isinstance(conv, nn.Conv2d) and self.tiles_exactly and weight.ndim == 4
                and tuple(weight.shape[:2]) == tuple(conv.weight.shape[:2])):
            return weight
        return resample_patch_kernel(weight, tuple(conv.weight.shape[-2:]))

    @property
    def tiles_exactly(self) -> bool:
        return self.stride == self.patch_size and self.padding == 0

    def check_input(self, x: torch.Tensor) -> None:
        if x.ndim != 4 or x.shape[1] != self.in_chans:
            raise ValueError(f"expected images of shape (B, {self.in_chans}, H, W), got {tuple(x.shape)}; "
                             f"convert grayscale/RGBA images to {self.in_chans} channels first")
        h, w = x.shape[-2:]
        if self.tiles_exactly and (h % self.patch_size or w % self.patch_size):
            fit = lambda s: max(self.patch_size, round(s / self.patch_size) * self.patch_size)  # noqa: E731
            raise ValueError(f"input size {h}x{w} cannot be tiled by {self.patch_size}x{self.patch_size} patches; "
                             f"resize or pad it to a multiple of {self.patch_size} (e.g. {fit(h)}x{fit(w)})")

    def forward(self, x: torch.Tensor):
        self.check_input(x)
        x = self.proj(x)
        grid = (x.shape[-2], x.shape[-1])
        return self.norm(x.flatten(2).transpose(1, 2)), grid  # 'b d h w -> b (h w) d' as a view, no copy
