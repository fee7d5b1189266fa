"""NaFlex inputs (NaViT's patch packing with FlexiViT's resampled positions; timm's NaFlexViT): images of any size and
aspect ratio as one batch of patch vectors padded to a patch budget.

A :class:`NaFlexBatch` holds, for ``b`` images and a budget of ``n`` patches each,
    patches 'b n (ph pw c)'  each patch's values, row by row, the channel fastest (timm's NaFlex layout);
    coords  'b n 2'          each patch's (row, column) on its image's grid (0 on padding);
    valid   'b n'            True on an image's patches, False on the padding after them;
    grids                    each image's grid (h_i, w_i), its h_i * w_i patches first, row-major.
:func:`patchify` builds one from a list of images 'c h w' (or a 'b c h w' tensor); :func:`budget_size` is the largest
size of an image's aspect ratio whose grid fits the budget, :func:`fit_to_budget` resizes an image to it. A batch from
timm's NaFlex loader (its patches, patch_coord, patch_valid) is :meth:`NaFlexBatch.from_tensors`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from einops import rearrange

from ..core.resize import interpolate


@dataclass
class NaFlexBatch:
    """Patches 'b n (ph pw c)', coords 'b n 2' (row, column), valid 'b n' and each image's grid (h_i, w_i)."""
    patches: torch.Tensor
    coords: torch.Tensor
    valid: torch.Tensor
    grids: tuple[tuple[int, int], ...]

    @classmethod
    def from_tensors(cls, patches: torch.Tensor, coords: torch.Tensor, valid: torch.Tensor) -> NaFlexBatch:
        """A batch from its three tensors (timm's NaFlex loader: ``patches``, ``patch_coord``, ``patch_valid``); each
        image's grid is its valid patches' largest (row, column) + 1."""
        if patches.ndim != 3 or coords.shape != (*patches.shape[:2], 2) or valid.shape != patches.shape[:2]:
            raise ValueError(f"a NaFlex batch is patches 'b n (ph pw c)', coords 'b n 2' and valid 'b n'; got "
                             f"shapes {tuple(patches.shape)}, {tuple(coords.shape)}, {tuple(valid.shape)}")
        valid = valid.bool()
        extent = (coords.long() * valid[..., None]).amax(dim=1) + 1  # 'b 2'
        return cls(patches, coords.long(), valid, tuple((int(h), int(w)) for h, w in extent.tolist()))

    def __len__(self) -> int:
        return self.patches.shape[0]


def budget_size(hw: tuple[int, int], patch_size: int, max_seq_len: int) -> tuple[int, int]:
    """The largest (h, w) of the aspect ratio of ``hw``, sides multiples of ``patch_size`` (each rounded up from the
    scaled side, at least one patch), whose grid has at most ``max_seq_len`` patches (timm's
    ``get_image_size_for_seq`` with sides divisible by the patch)."""
    if max_seq_len < 1:
        raise ValueError(f"max_seq_len must be at least 1, got {max_seq_len}")

    def grid(ratio: float) -> tuple[int, int]:
        return tuple(max(1, math.ceil(side * ratio / patch_size)) for side in hw)

    def fits(ratio: float) -> bool:
        h, w = grid(ratio)
        return h * w <= max_seq_len

    low, high = 0.0, 1.0
    while fits(high):  # grow until the budget is exceeded
        low, high = high, high * 2
    while high - low > 1e-5:  # the patch count grows with the ratio: bisect for the largest ratio that fits
        mid = (low + high) / 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    h, w = grid(low)
    return h * patch_size, w * patch_size


def fit_to_budget(image: torch.Tensor, patch_size: int, max_seq_len: int, mode: str = 'bilinear') -> torch.Tensor:
    """'c h w' resized (``mode``, antialiased) to :func:`budget_size`: its aspect ratio, at most ``max_seq_len``
    patches."""
    size = budget_size(image.shape[-2:], patch_size, max_seq_len)
    if tuple(image.shape[-2:]) == size:
        return image
    return interpolate(image[None], size=size, mode=mode, antialias=mode in ('bilinear', 'bicubic'),
                       align_corners=False if mode in ('bilinear', 'bicubic') else None)[0]


def patchify(images, patch_size: int, max_seq_len: int | None = None) -> NaFlexBatch:
    """Images (a list of 'c h_i w_i' tensors, or 'b c h w') -> a :class:`NaFlexBatch` of ``max_seq_len`` patches per
    image (default: the most any image has). A side the patches do not tile is zero-padded at its end (as timm's
    ``batch_patchify``); an image with more patches than the budget is an error (:func:`fit_to_budget` first)."""
    images = list(images)
    if not images:
        raise ValueError("patchify needs at least one image")
    p = patch_size
    rows, grids = [], []
    for i, image in enumerate(images):
        if image.ndim != 3 or image.shape[0] != images[0].shape[0]:
            raise ValueError(f"image {i}: expected 'c h w' with {images[0].shape[0]} channels like image 0, got "
                             f"shape {tuple(image.shape)}")
        h, w = image.shape[-2:]
        pad_h, pad_w = -h % p, -w % p
        if pad_h or pad_w:
            image = torch.nn.functional.pad(image, (0, pad_w, 0, pad_h))
        grids.append(((h + pad_h) // p, (w + pad_w) // p))
        rows.append(rearrange(image, 'c (h ph) (w pw) -> (h w) (ph pw c)', ph=p, pw=p))
    longest = max(len(r) for r in rows)
    n = longest if max_seq_len is None else max_seq_len
    if longest > n:
        i = max(range(len(rows)), key=lambda j: len(rows[j]))
        raise ValueError(f"image {i} of size {tuple(images[i].shape[-2:])} has {longest} patches of {p} px "
                         f"({grids[i][0]}x{grids[i][1]}), over the budget max_seq_len={n}; resize it first "
                         f"(zoo.backbones.naflex_batch.fit_to_budget) or raise max_seq_len")
    device, dtype = rows[0].device, rows[0].dtype
    patches = torch.zeros(len(rows), n, rows[0].shape[1], device=device, dtype=dtype)
    coords = torch.zeros(len(rows), n, 2, device=device, dtype=torch.long)
    valid = torch.zeros(len(rows), n, device=device, dtype=torch.bool)
    for i, (row, (h, w)) in enumerate(zip(rows, grids)):
        patches[i, :len(row)] = row
        ys, xs = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing='ij')
        coords[i, :len(row)] = torch.stack([ys.flatten(), xs.flatten()], dim=-1)
        valid[i, :len(row)] = True
    return NaFlexBatch(patches, coords, valid, tuple(grids))
