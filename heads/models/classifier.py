"""Image classification with any zoo backbone family, trained and evaluated through mmengine."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel

import zoo

from ..registry import MODELS
from .dense_model import average_logged_losses


@MODELS.register_module()
class ImageClassifier(BaseModel):
    """``zoo.create_classifier(name, num_classes=..., **backbone options)`` as an mmengine model.

    ``pooling``: 'token' (the CLS token, timm's ``global_pool='token'``) or 'avg' (mean of the patch tokens) for
    the families that have both (ViT/DeiT). Loss: cross-entropy with ``label_smoothing``; targets are class ids,
    or class-probability rows (``gt_score``, e.g. mixed by Mixup/CutMix). Predictions: ``pred_score`` (softmax,
    'k') and ``pred_label`` per sample.
    """

    def __init__(self, backbone: dict, num_classes: int, pooling: str | None = None, label_smoothing: float = 0.0,
                 data_preprocessor=None, init_cfg=None):
        super().__init__(data_preprocessor=MODELS.build(data_preprocessor or dict(type='DensePreprocessor')),
                         init_cfg=init_cfg)
        options = dict(backbone)
        if pooling is not None:
            options['global_pool'] = pooling
        self.classifier = zoo.create_classifier(options.pop('name'), num_classes=num_classes, **options)
        self.num_classes, self.label_smoothing = num_classes, label_smoothing

    def forward(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        if mode == 'tensor':
            return self.classifier(inputs)
        if mode == 'loss':
            return {'loss_cls': self.loss_of(self.classifier(inputs), data_samples)}
        if mode == 'predict':
            scores = self.classifier(inputs).float().softmax(-1)  # b k
            for sample, score in zip(data_samples, scores):
                sample.pred_score, sample.pred_label = score, score.argmax()
            return data_samples
        raise ValueError(f"mode must be 'tensor', 'loss' or 'predict', got {mode!r}")

    def loss_of(self, logits: torch.Tensor, data_samples) -> torch.Tensor:
        """Cross-entropy against the samples' ``gt_score`` rows when present, else their ``gt_label`` ids."""
        if 'gt_score' in data_samples[0]:
            target = torch.stack([s.gt_score for s in data_samples]).to(logits.device)  # b k
        else:
            target = torch.stack([s.gt_label for s in data_samples]).to(logits.device)  # b
            bad = target[(target < 0) | (target >= self.num_classes)]
            if bad.numel():
                raise ValueError(f"labels {bad.unique().tolist()} are outside the model's {self.num_classes} "
                                 f"classes (num_classes); make it equal the dataset's class count")
        return F.cross_entropy(logits.float(), target, label_smoothing=self.label_smoothing)

    def parse_losses(self, losses: dict):
        return average_logged_losses(*super().parse_losses(losses))
