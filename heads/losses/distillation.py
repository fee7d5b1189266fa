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
from zoo.weights import CheckpointMismatchError, read_state_dict

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
    weights=None, ...)``, with the weights of the local ``checkpoint`` (read weights-only; .safetensors too).

    The teacher loads exactly or not at all: every tensor of the model from the checkpoint, of the same shape (a
    head of another class count, a resampled position table or a part left at initialisation would teach noise),
    else :class:`zoo.weights.CheckpointMismatchError` naming the file, the keys and what to change."""
    if source not in ('zoo', 'torchvision'):
        raise ValueError(f"teacher source must be 'zoo' or 'torchvision', got {source!r}")
    state = read_state_dict(checkpoint)
    if all(key.startswith(TRAINED_PREFIX) for key in state):  # this project's ImageClassifier training checkpoint
        state = {key[len(TRAINED_PREFIX):]: value for key, value in state.items()}
    if source == 'zoo':  # a zoo/timm checkpoint
        teacher = zoo.create_classifier(name, num_classes=num_classes, **options)
        report = zoo.load_pretrained(teacher, state, name=str(checkpoint))
        changed = report.reinitialized + report.resized + report.dropped + report.fresh
        if changed:
            raise CheckpointMismatchError(_inexact_message(checkpoint, name, num_classes, report, state))
    else:
        import torchvision
        teacher = torchvision.models.get_model(name, weights=None, num_classes=num_classes, **options)
        target = teacher.state_dict()
        missing, unexpected = sorted(set(target) - set(state)), sorted(set(state) - set(target))
        wrong = [f"{k} {tuple(state[k].shape)} vs model {tuple(v.shape)}" for k, v in target.items()
                 if k in state and state[k].shape != v.shape]
        if missing or unexpected or wrong:
            raise CheckpointMismatchError(
                f"teacher checkpoint {checkpoint} does not fit torchvision's {name} with num_classes={num_classes}: "
                f"missing {missing[:5]}, unexpected {unexpected[:5]}, shape mismatch {wrong[:5]}. A teacher "
                f"loads exactly: build it as it was trained (the student's num_classes must be the teacher's)")
        teacher.load_state_dict(state)
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher.eval()


def _inexact_message(checkpoint, name: str, num_classes: int, report, state: dict) -> str:
    """Why a zoo teacher did not load exactly, with the shapes, and what to change."""
    lines = []
    if report.reinitialized:
        heads = ', '.join(f"{k} {tuple(state[k].shape) if k in state else ''}".strip() for k in report.reinitialized)
        lines.append(f"its head has another class count ({heads}) than the {num_classes} classes asked for "
                     f"(the student's num_classes); a teacher's head is never re-initialised: train the teacher on "
                     f"the student's classes")
    if report.resized:
        lines.append(f"position tables {report.resized} were trained on another grid: build the teacher with the "
                     f"checkpoint's img_size/patch_size (teacher options)")
    if report.dropped or report.fresh:
        lines.append(f"checkpoint keys {report.dropped[:5]} have no place in the model and model parts "
                     f"{report.fresh[:5]} none in the checkpoint: another variant? (teacher name {name!r})")
    return f"teacher checkpoint {checkpoint} does not load exactly into {name}: " + '; '.join(lines)
