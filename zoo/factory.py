"""Building named models, optionally with pretrained weights."""
from __future__ import annotations

import logging

from torch import nn

from .core import set_grad_checkpointing
from .registry import get_variant
from .weights import load_pretrained


def create_backbone(name: str, *, pretrained=None, out_indices=None, grad_checkpointing: bool = False,
                    lora: dict | None = None, **overrides) -> nn.Module:
    """A dense backbone: ``forward(x)`` gives NCHW maps at ``out_indices`` with ``out_channels``/``out_strides``.

    ``pretrained`` is a path (.safetensors/.pth/.pt/.bin or an HF folder) or a state dict in this project's
    or timm's layout; a classifier checkpoint loads with its head dropped. ``grad_checkpointing``: the
    transformer blocks recompute their activations in backward (:func:`zoo.core.set_grad_checkpointing`).
    ``lora``: ``dict(rank=, alpha=, dropout=, targets=, trainable=)`` adds LoRA adapters (after the weights load) and
    freezes everything else (:func:`zoo.lora.apply_lora`).
    """
    if out_indices is not None:
        overrides['out_indices'] = tuple(out_indices)
    backbone = _finish(get_variant(name).build('backbone', **overrides), pretrained, grad_checkpointing)
    return backbone if lora is None else with_lora(backbone, lora)


def with_lora(model: nn.Module, lora: dict) -> nn.Module:
    """``model`` with :func:`zoo.lora.apply_lora` of the ``lora`` options; the trained share is logged."""
    from .lora import apply_lora, lora_summary
    if not isinstance(lora, dict):
        raise TypeError(f"lora must be a dict of apply_lora options (rank, alpha, dropout, targets, trainable), "
                        f"got {lora!r}")
    model = apply_lora(model, **lora)
    logging.getLogger(__name__).info("%s: %s", model.pretrained_cfg['name'], lora_summary(model))
    return model


def create_classifier(name: str, *, pretrained=None, num_classes: int | None = None, grad_checkpointing: bool = False,
                      **overrides) -> nn.Module:
    """An image classifier returning logits, numerically the reference model given the same weights.

    ``num_classes`` None: the class count of timm's default weights of ``name`` (its ``pretrained_cfg``; 0, no head,
    for the self-supervised ones such as DINOv2), so that timm's own file loads as it is."""
    if num_classes is not None:
        overrides['num_classes'] = num_classes
    return _finish(get_variant(name).build('classifier', **overrides), pretrained, grad_checkpointing)


def _finish(model: nn.Module, pretrained, grad_checkpointing: bool) -> nn.Module:
    """Weights and checkpointing. The model is the same on every machine: its CPU kernels are a separate step,
    :func:`zoo.runtime.apply_kernel_policy`."""
    if pretrained is True:
        raise ValueError(pretrained_true_message(model.pretrained_cfg['name']))
    if pretrained is not None and pretrained is not False:  # False: timm's spelling of "no weights"
        load_pretrained(model, pretrained)
    return set_grad_checkpointing(model, grad_checkpointing)


def pretrained_true_message(name: str) -> str:
    """What to pass instead of timm's ``pretrained=True``, and how to get such a file."""
    return (f"pretrained=True: nothing is downloaded here, weights come from local files. Pass a path instead, "
            f"e.g. pretrained='{name}.safetensors' (.safetensors, .pth, .pt, .bin or a "
            f"Hugging Face save_pretrained folder; timm's, transformers' or this project's layout). To make one on a "
            f"machine with internet: `m = timm.create_model({name!r}, pretrained=True); "
            f"safetensors.torch.save_file(m.state_dict(), '{name}.safetensors')` (or save_pretrained of a "
            f"transformers model), then copy the file here; tools/convert_weights.py converts other layouts.")
