"""Bounds on the size of the model a transformers ``config.json`` describes, checked before anything is allocated.

Every integer field of a config is accepted up to 2^20 on its own, but together they can describe a model of
terabytes (``image_size`` 1,048,576 in 16-pixel patches: a position table of 4.3e9 rows). So the position grid and
the number of blocks are bounded first (:func:`check_grid`, :func:`check_blocks`: cheap, from the fields), then the
model config is built on the meta device, which allocates nothing, and its parameters and buffers are counted
(:func:`check_model_size`). Each refusal names the file, the fields and the limit.
"""
from __future__ import annotations

import torch

from .config import HFConfigError

#: Position-table rows (patches of the build grid): a 4096 x 4096 image in 16-pixel patches. DPT-large has 576.
MAX_GRID_TOKENS = 1 << 16
#: Transformer blocks plus ResNet blocks: ViT-22B has 48 transformer blocks.
MAX_BLOCKS = 256
#: Parameters and buffers, 16 GiB in float32; the largest DPT / Depth Anything models have 0.35e9.
MAX_PARAMETERS = 1 << 32


def check_grid(source, image_size: int, patch_size: int, fields: str = 'image_size / patch_size') -> None:
    """Refuse a build grid of more than :data:`MAX_GRID_TOKENS` patches."""
    side = image_size // patch_size
    if side < 1 or side * side > MAX_GRID_TOKENS:
        raise HFConfigError(f"{source}: fields {fields} = {image_size} / {patch_size} give a {side} x {side} grid of "
                            f"patches, outside 1 to {MAX_GRID_TOKENS} patches (the position table has a row per "
                            f"patch); fix image_size or patch_size")


def check_blocks(source, blocks: dict[str, int]) -> None:
    """Refuse more than :data:`MAX_BLOCKS` blocks in all (``blocks``: field name -> its count of blocks)."""
    if sum(blocks.values()) > MAX_BLOCKS:
        counts = ', '.join(f'{name} = {count}' for name, count in blocks.items())
        raise HFConfigError(f"{source}: fields {counts}: {sum(blocks.values())} blocks in all, above the limit of "
                            f"{MAX_BLOCKS}; fix them")


def check_model_size(model: dict, source, fields: dict) -> None:
    """Build ``model`` (a model config) on the meta device and refuse it above :data:`MAX_PARAMETERS` parameters and
    buffers; ``fields``: the config's size fields, named in the message."""
    from ..registry import MODELS
    with torch.device('meta'):
        built = MODELS.build(model)
    tensors = dict(built.named_parameters())
    tensors.update(built.named_buffers())
    total = sum(t.numel() for t in tensors.values())
    if total > MAX_PARAMETERS:
        largest = max(tensors, key=lambda k: tensors[k].numel())
        sizes = ', '.join(f'{k} = {v}' for k, v in fields.items())
        raise HFConfigError(f"{source}: the model it describes has {total:,} parameters, above the limit of "
                            f"{MAX_PARAMETERS:,} (the largest, {largest}, is {tuple(tensors[largest].shape)}); fix the "
                            f"size fields: {sizes}")
