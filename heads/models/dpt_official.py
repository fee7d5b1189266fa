"""The official DPT checkpoints (isl-org/DPT; Ranftl et al. 2021) as this project's Segmentor / DepthEstimator.

Their layout (``dpt_hybrid-midas-*.pt``, ``dpt_hybrid-ade20k-*.pt``, the ViT ones ``dpt_large-*``) is the
``'isl-org DPT'`` row of :data:`heads.layouts.table.LAYOUTS` (:mod:`heads.layouts.official`).

``dpt_hybrid_config(task)`` is the model config of the released DPT-Hybrid models, ``load_official_dpt(model,
checkpoint)`` loads such a checkpoint into a model built here.
"""
from __future__ import annotations

from ..layouts.table import named
from .task_checkpoint import load_task_checkpoint

HALF_255 = (127.5, 127.5, 127.5)  # the official transforms: NormalizeImage(mean=0.5, std=0.5) on 0-1 images

def dpt_hybrid_config(task: str = 'ade20k') -> dict:
    """The released DPT-Hybrid: ViT-B/16 on a BiT R50, taps ResNet stages 0/1 and blocks 8/11, neck widths
    256/512/768/768 (the stage maps entering as they are), fusion 256. 'ade20k': segmentation of 150 classes with
    BatchNorm in the fusion units and the auxiliary head; 'midas': relative inverse depth."""
    if task not in ('ade20k', 'midas'):
        raise ValueError(f"DPT-Hybrid task must be 'ade20k' or 'midas', got {task!r}")
    backbone = dict(type='ZooBackbone', name='vit_base_r50_s16_384', out_indices=(0, 1, 11, 14), pos_interp='bilinear',
                    pos_antialias=False)
    seg = task == 'ade20k'
    neck = dict(type='DPTNeck', readout='project', hidden_channels=(256, 512, 768, 768), plain_levels=(0, 1),
                fusion_channels=256, fusion_batch_norm=seg)
    preprocessor = dict(type='DensePreprocessor', mean=HALF_255, std=HALF_255, size_divisor=32)
    if seg:
        return dict(type='Segmentor', backbone=backbone, neck=neck, data_preprocessor=preprocessor,
                    decode_head=dict(type='DPTSegHead', num_classes=150, in_channels=256, dropout=0.1),
                    auxiliary_head=dict(type='DPTSegHead', num_classes=150, in_channels=256, upsample=False))
    return dict(type='DepthEstimator', backbone=backbone, neck=neck, data_preprocessor=preprocessor,
                decode_head=dict(type='DPTDepthHead', in_channels=256, mode='relative'))


def load_official_dpt(model, checkpoint):
    """Load an official DPT checkpoint (a path or state dict) into a DPT model built here (e.g. from
    :func:`dpt_hybrid_config`); returns zoo's load report (a misfit is an error naming the keys)."""
    return load_task_checkpoint(model, checkpoint, layouts=named('isl-org DPT'))
