"""Depth Anything V2 (Yang et al. 2024) as a :class:`DepthEstimator`: a DINOv2 backbone whose taps go through its
final norm, :class:`heads.necks.DepthAnythingNeck` and :class:`heads.decode_heads.DepthAnythingHead`.

``depth_anything_v2_config(encoder)`` is the model config of the official sizes ('vits', 'vitb', 'vitl', 'vitg');
``load_depth_anything_v2(checkpoint, encoder)`` builds it with the weights of an official checkpoint
(DepthAnything/Depth-Anything-V2, the metric-depth ones too; their layout: the ``'Depth Anything V2'`` row of
:data:`heads.layouts.table.LAYOUTS`, :mod:`heads.layouts.official`).
transformers' ``DepthAnythingForDepthEstimation`` folders load through ``heads.from_pretrained_hf``
(:mod:`heads.hf.depth_anything`).

Position table: the official code resamples it with DINOv2's offset rule (``pos_interp='dinov2'``), transformers
bicubically to the grid (``'bicubic'``, no antialias); at the 518x518 build size both use it as it is.
"""
from __future__ import annotations

from ..layouts.table import named
from ..registry import MODELS
from .preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
from .task_checkpoint import load_task_checkpoint

#: encoder -> (backbone name, tapped blocks, neck widths ``out_channels``, fusion width ``features``)
DEPTH_ANYTHING_V2 = {
    'vits': ('vit_small_patch14_dinov2', (2, 5, 8, 11), (48, 96, 192, 384), 64),
    'vitb': ('vit_base_patch14_dinov2', (2, 5, 8, 11), (96, 192, 384, 768), 128),
    'vitl': ('vit_large_patch14_dinov2', (4, 11, 17, 23), (256, 512, 1024, 1024), 256),
    'vitg': ('vit_giant_patch14_dinov2', (9, 19, 29, 39), (1536, 1536, 1536, 1536), 384),
}


def depth_anything_v2_config(encoder: str = 'vits', mode: str = 'relative', max_depth: float = 20.0,
                             pos_interp: str = 'dinov2', **backbone_overrides) -> dict:
    """The model config of Depth Anything V2 ``encoder``: relative (inverse depth, the released base models) or
    metric (metres in (0, ``max_depth``): 20 for the indoor (Hypersim) models, 80 outdoor)."""
    if encoder not in DEPTH_ANYTHING_V2:
        raise ValueError(f"unknown Depth Anything V2 encoder {encoder!r}; choose one of {', '.join(DEPTH_ANYTHING_V2)}")
    name, taps, widths, fusion = DEPTH_ANYTHING_V2[encoder]
    backbone = dict(type='ZooBackbone', name=name, out_indices=taps, tap_norm=True, pos_interp=pos_interp,
                    pos_antialias=False, **backbone_overrides)
    head_depth = max_depth if mode == 'metric' else 1.0
    return dict(type='DepthEstimator', backbone=backbone,
                neck=dict(type='DepthAnythingNeck', hidden_channels=widths, fusion_channels=fusion),
                decode_head=dict(type='DepthAnythingHead', in_channels=fusion, mode=mode, max_depth=head_depth,
                                 upsample=14 / 8),
                max_depth=max_depth,
                data_preprocessor=dict(type='DensePreprocessor', mean=IMAGENET_MEAN_255, std=IMAGENET_STD_255,
                                       size_divisor=14))


def load_official_depth_anything(model, checkpoint):
    """Load an official Depth Anything V2 checkpoint (a path or state dict) into a Depth Anything
    :class:`DepthEstimator` built here; returns zoo's load report (a misfit is an error naming the keys)."""
    return load_task_checkpoint(model, checkpoint, layouts=named('Depth Anything V2'))


def load_depth_anything_v2(checkpoint, encoder: str = 'vits', mode: str = 'relative', max_depth: float = 20.0):
    """Our :class:`DepthEstimator` with the weights of an official Depth Anything V2 checkpoint, in eval mode;
    ``model(x, mode='tensor')`` gives the official ``model(x)[:, None]``."""
    model = MODELS.build(depth_anything_v2_config(encoder, mode, max_depth))
    load_official_depth_anything(model, checkpoint)
    return model.eval()
