"""torchvision.transforms.v2 augmentations in a pipeline, for image-level tasks (classification, pre-training).

``dict(type='TorchvisionTransform', transform='RandAugment', num_ops=2, magnitude=9)`` applies
``torchvision.transforms.v2.RandAugment(num_ops=2, magnitude=9)`` to ``results['img']``; any v2 transform that
takes an image works (RandomResizedCrop, ColorJitter, RandomErasing, AutoAugment, ...). They move only the image:
dense annotations would no longer match, so a pipeline that loaded any is refused (use the joint transforms of
:mod:`heads.transforms` there). Their randomness is torch's (seeded per worker by mmengine).
"""
from __future__ import annotations

import numpy as np
import torch

from ..registry import TRANSFORMS
from .base import DenseTransform, present_fields, require_image


@TRANSFORMS.register_module()
class TorchvisionTransform(DenseTransform):
    """Apply ``torchvision.transforms.v2.<transform>(**kwargs)`` to the 'h w 3' uint8 image (module docstring)."""

    def __init__(self, transform: str, **kwargs):
        import torchvision.transforms.v2 as v2
        if not hasattr(v2, transform):
            raise ValueError(f"torchvision.transforms.v2 has no {transform!r}")
        self.name, self.kwargs = transform, kwargs
        self._transform = getattr(v2, transform)(**kwargs)

    def transform(self, results: dict) -> dict:
        img = require_image(results, f'TorchvisionTransform({self.name})')
        if present_fields(results):
            raise ValueError(f"TorchvisionTransform({self.name}) moves the image only, but {present_fields(results)} "
                             f"are loaded for {results.get('img_path')}: use the dense transforms for dense tasks")
        out = self._transform(torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))))  # h w c -> c h w
        results['img'] = np.ascontiguousarray(out.numpy().transpose(1, 2, 0))
        results['img_shape'] = results['img'].shape[:2]
        return results
