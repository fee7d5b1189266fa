"""Batching for dense tasks: normalise, pad to the stride, pad labels with the ignore index."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmengine.model import BaseDataPreprocessor
from mmengine.structures import PixelData

from zoo.registry import IMAGENET_MEAN, IMAGENET_STD

from ..io.labels import IGNORE_INDEX
from ..registry import MODELS

#: ImageNet's mean and std on the 0-255 scale this preprocessor normalises (zoo.registry's 0-1 values x 255)
IMAGENET_MEAN_255 = tuple(round(255 * m, 3) for m in IMAGENET_MEAN)  # (123.675, 116.28, 103.53)
IMAGENET_STD_255 = tuple(round(255 * s, 3) for s in IMAGENET_STD)  # (58.395, 57.12, 57.375)


def pad_to(x: torch.Tensor, size: tuple[int, int], value: float) -> torch.Tensor:
    """Pad '... h w' on the bottom and right to ``size``."""
    return F.pad(x, (0, size[1] - x.shape[-1], 0, size[0] - x.shape[-2]), value=value)


@MODELS.register_module()
class DensePreprocessor(BaseDataPreprocessor):
    """``{'inputs': [c h w uint8/float, ...], 'data_samples': [...]}`` -> a normalised, padded 'b c H W' batch.

    Images are normalised with ``mean``/``std`` (0-255 scale, RGB), then padded bottom/right with ``pad_val`` to
    a common size that is a multiple of ``size_divisor``; in training ``gt_sem_seg`` is padded with
    ``seg_pad_val`` (ignored) and ``gt_depth`` with 0 (invalid); in evaluation they stay at their size. Each
    sample's metainfo gets ``img_shape`` (before padding) and
    ``pad_shape``; ``ori_shape`` is kept if the pipeline set it.
    ``size`` (h, w): training batches are padded to at least this size (mmseg's ``size``, its DPT recipe pads every
    batch to the 512x512 crop, so that smaller crops add ignored pixels and zeros that the loss and BatchNorm see);
    evaluation batches are not.
    """

    def __init__(self, mean=IMAGENET_MEAN_255, std=IMAGENET_STD_255, size_divisor: int = 32,
                 pad_val: float = 0.0, seg_pad_val: int = IGNORE_INDEX, bgr_to_rgb: bool = False,
                 non_blocking: bool = False, size: tuple[int, int] | None = None):
        super().__init__(non_blocking)
        if size is not None and (len(size) != 2 or min(size) < 1):
            raise ValueError(f"size must be (height, width) in pixels, got {size!r}")
        self.size = None if size is None else (int(size[0]), int(size[1]))
        self.register_buffer('mean', torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1), persistent=False)
        self.register_buffer('std', torch.tensor(std, dtype=torch.float32).view(-1, 1, 1), persistent=False)
        self.size_divisor, self.pad_val = size_divisor, pad_val
        self.seg_pad_val, self.bgr_to_rgb = seg_pad_val, bgr_to_rgb

    def forward(self, data: dict, training: bool = False) -> dict:
        data = self.cast_data(data)
        images = list(data['inputs'])
        samples = data.get('data_samples')
        images = [(img[[2, 1, 0]] if self.bgr_to_rgb else img).float() for img in images]
        images = [(img - self.mean) / self.std for img in images]
        d = self.size_divisor
        height = -(-max(img.shape[-2] for img in images) // d) * d
        width = -(-max(img.shape[-1] for img in images) // d) * d
        if training and self.size is not None:
            height, width = max(height, self.size[0]), max(width, self.size[1])
        batch = torch.stack([pad_to(img, (height, width), self.pad_val) for img in images])
        for img, sample in zip(images, samples or []):
            sample.set_metainfo({'img_shape': tuple(img.shape[-2:]), 'pad_shape': (height, width),
                                 'ori_shape': sample.metainfo.get('ori_shape', tuple(img.shape[-2:]))})
            if not training:  # evaluation compares predictions with ground truth at the original size
                continue
            if 'gt_sem_seg' in sample:
                sample.gt_sem_seg = PixelData(data=pad_to(sample.gt_sem_seg.data, (height, width), self.seg_pad_val))
            if 'gt_depth' in sample:
                sample.gt_depth = PixelData(data=pad_to(sample.gt_depth.data, (height, width), 0.0))
        return {'inputs': batch, 'data_samples': samples}


@MODELS.register_module()
class ClassificationPreprocessor(DensePreprocessor):
    """:class:`DensePreprocessor` that, in training, mixes each batch with torchvision's ``MixUp`` (``mixup_alpha``)
    and/or ``CutMix`` (``cutmix_alpha``; with both, one of them per batch, chosen with even odds as DeiT does).
    Each sample is mixed with the one before it in the batch; its ``gt_score`` gets the mixed label row, weighted
    by the mixing coefficient (MixUp) or by the pasted box's share of the area (CutMix)."""

    def __init__(self, num_classes: int, mixup_alpha: float = 0.0, cutmix_alpha: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        import torchvision.transforms.v2 as v2
        mixes = ([v2.MixUp(alpha=mixup_alpha, num_classes=num_classes)] if mixup_alpha > 0 else []) + \
            ([v2.CutMix(alpha=cutmix_alpha, num_classes=num_classes)] if cutmix_alpha > 0 else [])
        self.mix = v2.RandomChoice(mixes) if len(mixes) > 1 else (mixes[0] if mixes else None)

    def forward(self, data: dict, training: bool = False) -> dict:
        data = super().forward(data, training)
        samples = data['data_samples']
        if training and self.mix is not None and samples:
            labels = torch.stack([s.gt_label for s in samples]).to(data['inputs'].device)  # b
            data['inputs'], scores = self.mix(data['inputs'], labels)  # b c h w, b k
            for sample, row in zip(samples, scores):
                sample.gt_score = row
        return data
