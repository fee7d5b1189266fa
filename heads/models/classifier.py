"""Image classification with any zoo backbone family, trained and evaluated through mmengine."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import zoo

from ..losses.distillation import build_teacher, distillation_loss
from ..registry import MODELS
from .task_model import TaskModel


@MODELS.register_module()
class ImageClassifier(TaskModel):
    """``zoo.create_classifier(name, num_classes=..., **backbone options)`` as an mmengine model.

    ``pooling`` (ViT): 'token' (the CLS token, timm's ``global_pool='token'``), 'avg' (mean of the patch tokens)
    or 'attention' (a learned query attending over them, :class:`zoo.core.AttentionPool`). Loss: cross-entropy with
    ``label_smoothing``; targets are class ids,
    or class-probability rows (``gt_score``, e.g. mixed by Mixup/CutMix). Predictions: ``pred_score`` (softmax,
    'k') and ``pred_label`` per sample (a distilled DeiT: the mean of its two heads).

    ``distillation=dict(kind='hard'|'soft', alpha=0.5, tau=1.0, teacher=dict(name=..., checkpoint=...,
    source='zoo'|'torchvision'))``: DeiT training against a frozen teacher (:mod:`heads.losses.distillation`).

    ``backbone=dict(name='resnet18', source='torchvision', ...)``: a torchvision classifier built from scratch
    (``torchvision.models.get_model(name, weights=None, num_classes=..., **options)``) instead of a zoo one, e.g. to
    train a CNN teacher here; its checkpoints load as a teacher with ``source='torchvision'``.
    """

    def __init__(self, backbone: dict, num_classes: int, pooling: str | None = None, label_smoothing: float = 0.0,
                 distillation: dict | None = None, data_preprocessor=None, init_cfg=None):
        super().__init__(data_preprocessor=MODELS.build(data_preprocessor or dict(type='DensePreprocessor')),
                         init_cfg=init_cfg)
        options = dict(backbone)
        source = options.pop('source', 'zoo')
        if pooling is not None:
            options['global_pool'] = pooling
        if source == 'zoo':
            self.classifier = zoo.create_classifier(options.pop('name'), num_classes=num_classes, **options)
        elif source == 'torchvision':
            import torchvision
            self.classifier = torchvision.models.get_model(options.pop('name'), weights=None,
                                                           num_classes=num_classes, **options)
        else:
            raise ValueError(f"backbone source must be 'zoo' or 'torchvision', got {source!r}")
        self.num_classes, self.label_smoothing = num_classes, label_smoothing
        self.distillation = dict(distillation or {})
        teacher = self.distillation.pop('teacher', None)
        # kept outside the module tree: not in the state dict, the optimizer or the DDP wrapper
        self._teacher = [build_teacher(num_classes=num_classes, **teacher)] if teacher else []

    def forward(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        if mode == 'tensor':
            return self.classifier(inputs)
        if mode == 'loss':
            logits = self.classifier(inputs)
            if self._teacher:
                return {'loss_distill': self.distillation_loss_of(logits, inputs, data_samples)}
            return {'loss_cls': self.loss_of(logits[0] if isinstance(logits, tuple) else logits, data_samples)}
        if mode == 'predict':
            scores = self.classifier(inputs).float().softmax(-1)  # b k
            for sample, score in zip(data_samples, scores):
                sample.pred_score, sample.pred_label = score, score.argmax()
            return data_samples
        raise ValueError(f"mode must be 'tensor', 'loss' or 'predict', got {mode!r}")

    def target_of(self, data_samples, device) -> torch.Tensor:
        """The samples' ``gt_score`` rows 'b k' when present, else their ``gt_label`` ids 'b' (checked)."""
        if 'gt_score' in data_samples[0]:
            return torch.stack([s.gt_score for s in data_samples]).to(device)
        target = torch.stack([s.gt_label for s in data_samples]).to(device)
        bad = target[(target < 0) | (target >= self.num_classes)]
        if bad.numel():
            raise ValueError(f"labels {bad.unique().tolist()} are outside the model's {self.num_classes} "
                             f"classes (num_classes); make it equal the dataset's class count")
        return target

    def loss_of(self, logits: torch.Tensor, data_samples) -> torch.Tensor:
        """Cross-entropy (label-smoothed) against :meth:`target_of`."""
        return F.cross_entropy(logits.float(), self.target_of(data_samples, logits.device),
                               label_smoothing=self.label_smoothing)

    def distillation_loss_of(self, logits, inputs: torch.Tensor, data_samples) -> torch.Tensor:
        """DeiT's objective (:func:`heads.losses.distillation_loss`) with the teacher's logits on ``inputs``;
        a student without a distillation token uses its one head for both terms."""
        cls_logits, dist_logits = logits if isinstance(logits, tuple) else (logits, logits)
        teacher = self._teacher[0].to(inputs.device)
        with torch.no_grad():
            teacher_logits = teacher(inputs)
        return distillation_loss(cls_logits, dist_logits, teacher_logits, self.target_of(data_samples, inputs.device),
                                 label_smoothing=self.label_smoothing, **self.distillation)
