"""MoGe-2's checkpoints (microsoft/MoGe ``moge.model.v2.MoGeModel``: the ``model`` of Ruicheng/moge-2-*'s
``model.pt``) -> :class:`heads.models.moge.MoGe2` keys: the ``'MoGe-2'`` row of :data:`heads.layouts.table.LAYOUTS`.

``encoder.backbone.*`` is their DINOv2 (:func:`zoo.weights.dinov2.dinov2_from_official`, under ``backbone.``),
``encoder.output_projections.{i}`` our ``projections.{i}``; ``neck.*`` is ours as it is (:class:`~heads.necks.ConvStack`
keeps their names), ``{points,normal,mask,scale}_head.*`` ours under ``head.``. Their ``encoder.image_mean`` and
``image_std`` are checked to be ImageNet's (ours, fixed), not loaded.
"""
from __future__ import annotations

import torch

from zoo.registry import IMAGENET_MEAN, IMAGENET_STD
from zoo.weights import CheckpointLayoutError
from zoo.weights.dinov2 import dinov2_from_official

from .dpt_names import keep_backbone_blocks

_HEADS = ('points_head.', 'normal_head.', 'mask_head.', 'scale_head.')
_PARTS = ('encoder.', 'neck.', *_HEADS)


def is_moge2(state: dict) -> bool:
    """Keys under ``encoder.backbone.``, ``encoder.output_projections.``, ``neck.`` and the heads only, with a
    points head."""
    keys = [k for k in state if isinstance(k, str)]
    return len(keys) == len(state) and any(k.startswith('encoder.output_projections.') for k in keys) and \
        any(k.startswith('points_head.') for k in keys) and all(k.startswith(_PARTS) for k in keys)


def _check_normalisation(state: dict) -> None:
    for key, want in (('encoder.image_mean', IMAGENET_MEAN), ('encoder.image_std', IMAGENET_STD)):
        value = state.get(key)
        if value is not None and not torch.allclose(value.float().flatten(), torch.tensor(want), atol=1e-6):
            raise CheckpointLayoutError(key, f"{value.flatten().tolist()} is not ImageNet's {list(want)}, which "
                                        "MoGe2 normalises with", "Use a MoGe-2 checkpoint of ImageNet's normalisation")


def moge2_from_authors(state: dict, model) -> dict:
    """The authors' keys (module docstring) -> ours for ``model`` (its blocks after the last tap dropped)."""
    _check_normalisation(state)
    encoder = {k[len('encoder.backbone.'):]: v for k, v in state.items() if k.startswith('encoder.backbone.')}
    ours = {f'backbone.{k}': v for k, v in dinov2_from_official(encoder).items()}
    for key, value in state.items():
        if key.startswith('encoder.output_projections.'):
            ours['projections.' + key[len('encoder.output_projections.'):]] = value
        elif key.startswith('neck.'):
            ours[key] = value
        elif key.startswith(_HEADS):
            ours['head.' + key] = value
    return keep_backbone_blocks(ours, len(model.backbone.blocks))
