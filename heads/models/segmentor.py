"""Semantic segmentation: DPT with a segmentation head and an optional auxiliary head."""
from __future__ import annotations

import torch
from mmengine.structures import PixelData

from zoo.core.resize import interpolate

from ..io.labels import IGNORE_INDEX
from ..registry import MODELS
from .dense_model import DenseModel, build


def resize_to(x: torch.Tensor, size) -> torch.Tensor:
    return x if x.shape[-2:] == tuple(size) else interpolate(x, size=size, mode='bilinear', align_corners=False)


@MODELS.register_module()
class Segmentor(DenseModel):
    """``decode_head`` on the finest fused map; ``auxiliary_head`` (weight ``aux_weight``) on the same map (heads
    with ``reads_levels``, UperNet's, on every level: :meth:`DenseModel.head_input`).

    Samples carry ``gt_sem_seg`` (PixelData '1 h w', 255 = ignore); predictions are ``seg_logits``
    ('k h w') and ``pred_sem_seg`` ('1 h w') at each image's original size.
    """
    gemm_weight_grad_parts = ('neck', 'decode_head', 'auxiliary_head')

    def __init__(self, backbone, decode_head, neck=None, auxiliary_head=None, aux_weight: float = 0.4,
                 loss=None, **kwargs):
        super().__init__(backbone, decode_head, neck, **kwargs)
        self.auxiliary_head = self.build_head(auxiliary_head)
        self.prepare_convolutional_parts(self.auxiliary_head)
        self.aux_weight = aux_weight
        self.loss_fn = build(loss or dict(type='CrossEntropyLoss', ignore_index=IGNORE_INDEX))

    def loss(self, inputs, data_samples) -> dict:
        labels = torch.stack([s.gt_sem_seg.data[0] for s in data_samples]).long()  # b h w
        features = self.extract_features(inputs)
        logits = self.decode_head(self.head_input(features, self.decode_head))
        losses = {'loss_ce': self.loss_fn(resize_to(logits, labels.shape[-2:]), labels)}
        if self.auxiliary_head is not None:
            aux = resize_to(self.auxiliary_head(self.head_input(features, self.auxiliary_head)), labels.shape[-2:])
            losses['loss_aux'] = self.aux_weight * self.loss_fn(aux, labels)
        return losses

    def store_prediction(self, sample, output: torch.Tensor) -> None:
        sample.seg_logits = PixelData(data=output)
        sample.pred_sem_seg = PixelData(data=output.argmax(dim=0, keepdim=True))
