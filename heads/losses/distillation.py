"""DeiT distillation (Touvron et al. 2021): a frozen teacher's logits train the student's distillation head.

``kind='soft'``: ``(1 - alpha) CE(cls, y) + alpha tau^2 KL(softmax(teacher / tau) || softmax(dist / tau))``, the KL
averaged over the batch (the paper's definition; DeiT's code divides the summed KL by batch x classes instead).
``kind='hard'``: ``(1 - alpha) CE(cls, y) + alpha CE(dist, argmax teacher)`` (DeiT: alpha 0.5). A student without a
distillation head gives the same logits for both. The teacher is any zoo classifier or torchvision model, built
here and filled from a local checkpoint, kept out of the student's state dict, optimizer and DDP wrapper.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.weights import read_state_dict

KINDS = ('soft', 'hard')
#: Where ImageClassifier keeps its zoo classifier: the key prefix of its training checkpoints.
TRAINED_PREFIX = 'classifier.'


def distillation_loss(cls_logits: torch.Tensor, dist_logits: torch.Tensor, teacher_logits: torch.Tensor,
                      target: torch.Tensor, kind: str = 'hard', alpha: float = 0.5, tau: float = 1.0,
                      label_smoothing: float = 0.0) -> torch.Tensor:
    """The DeiT objective (module docstring); ``target`` class ids 'b' or probability rows 'b k'."""
    if kind not in KINDS:
        raise ValueError(f"distillation kind must be one of {KINDS}, got {kind!r}")
    base = F.cross_entropy(cls_logits.float(), target, label_smoothing=label_smoothing)
    teacher_logits = teacher_logits.detach().float()
    if kind == 'soft':
        student = F.log_softmax(dist_logits.float() / tau, dim=-1)
        teacher = F.log_softmax(teacher_logits / tau, dim=-1)
        distill = F.kl_div(student, teacher, reduction='batchmean', log_target=True) * tau * tau
    else:
        distill = F.cross_entropy(dist_logits.float(), teacher_logits.argmax(dim=-1))
    return (1 - alpha) * base + alpha * distill


def build_teacher(name: str, checkpoint: str, num_classes: int, source: str = 'zoo', **options) -> nn.Module:
    """A frozen teacher in eval mode: ``zoo.create_classifier(name, ...)`` or ``torchvision.models.get_model(name,
    weights=None, ...)``, with the weights of the local ``checkpoint`` (read weights-only; .safetensors too)."""
    if source not in ('zoo', 'torchvision'):
        raise ValueError(f"teacher source must be 'zoo' or 'torchvision', got {source!r}")
    state = read_state_dict(checkpoint)
    if all(key.startswith(TRAINED_PREFIX) for key in state):  # this project's ImageClassifier training checkpoint
        state = {key[len(TRAINED_PREFIX):]: value for key, value in state.items()}
    if source == 'zoo':  # a zoo/timm checkpoint
        teacher = zoo.create_classifier(name, pretrained=state, num_classes=num_classes, **options)
    elif source == 'torchvision':
        import torchvision
        teacher = torchvision.models.get_model(name, weights=None, num_classes=num_classes, **options)
        missing, unexpected = teacher.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(f"teacher checkpoint {checkpoint} does not fit torchvision's {name}: missing "
                             f"{missing[:5]}, unexpected {unexpected[:5]}")
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher.eval()
