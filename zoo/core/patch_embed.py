"""Convolutional patch (token) embedding: images to a grid of tokens."""
from __future__ import annotations

import torch
from torch import nn


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
