"""The one check of what every backbone family is given: a float batch of images 'b c h w' the model can take.

Each family calls :func:`check_images` at the single entry all its forward paths share (ViT/DeiT ``embed``,
CvT and CoAtNet ``forward_stages``, CrossViT ``forward_blocks``), so ``forward``, ``forward_taps`` and
``forward_features`` are all covered. A model states ``in_chans`` and ``min_input_size`` (the smallest side
whose coarsest map is at least one pixel); the rest is read off the input and the weights.
"""
from __future__ import annotations

import torch
from torch import nn


class ImageInputError(ValueError):
    """A backbone input that is not a float 'b c h w' batch the model can take; the message says how to fix it."""


def _weight_dtype(model: nn.Module) -> torch.dtype | None:
    for parameter in model.parameters():
        return parameter.dtype
    return None


def check_images(model: nn.Module, x) -> None:
    """Raise :class:`ImageInputError` unless ``x`` is a tensor 'b c h w' with ``model.in_chans`` channels, floating
    point of the weights' dtype, and sides of at least ``model.min_input_size``."""
    name = type(model).__name__
    chans = model.in_chans
    if not isinstance(x, torch.Tensor):
        raise ImageInputError(f"{name} takes a torch.Tensor of images (B, {chans}, H, W), got a "
                              f"{type(x).__module__}.{type(x).__name__}; convert it with torch.as_tensor(...) "
                              f"(an 'h w c' uint8 picture: .permute(2, 0, 1)[None], then normalise)")
    if x.ndim != 4 or x.shape[1] != chans:
        hint = {3: "a single image? add the batch dimension: x[None] (or x.unsqueeze(0))",
                5: "a batch of clips or stacks? fold the extra dimension into the batch: "
                   "rearrange(x, 'b t c h w -> (b t) c h w')"}.get(x.ndim, f"convert grayscale/RGBA images to "
                                                                     f"{chans} channels first")
        raise ImageInputError(f"expected images of shape (B, {chans}, H, W), got {tuple(x.shape)}; {hint}")
    if not x.is_floating_point():
        raise ImageInputError(f"{name} takes floating-point images, got {x.dtype}: convert and normalise first, "
                              f"e.g. (x.float() / 255 - mean) / std with the model's pretrained_cfg mean and std")
    dtype = _weight_dtype(model)
    if dtype is not None and x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
        raise ImageInputError(f"{name} has {dtype} weights but the images are {x.dtype}: cast the images "
                              f"(x.to({dtype})) or the model (model.to({x.dtype}))")
    h, w = x.shape[-2:]
    smallest = model.min_input_size
    if h < smallest or w < smallest:
        raise ImageInputError(f"input size {h}x{w} is below the smallest side {smallest} that {name} takes (its "
                              f"coarsest map is 1/{smallest} of the input); resize or pad the images to at least "
                              f"{smallest}x{smallest}")
