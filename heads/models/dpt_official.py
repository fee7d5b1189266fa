"""The official DPT checkpoints (isl-org/DPT; Ranftl et al. 2021) as this project's Segmentor / DepthEstimator.

Layout of ``dpt_hybrid-midas-*.pt`` and ``dpt_hybrid-ade20k-*.pt`` (and of the ViT ones, ``dpt_large-*``):
``pretrained.model.*`` is timm's ViT (for DPT-Hybrid its ``vit_base_resnet50_384``, the BiT ResNet under
``patch_embed.backbone``); ``pretrained.act_postprocess{1..4}`` reassemble the four levels (``.0.project.0`` the
readout Linear, ``.3`` the 1x1 projection, ``.4`` the resampling; DPT-Hybrid's first two are Identity);
``scratch.layer{1..4}_rn`` are the 3x3 convs into the fusion width; ``scratch.refinenet{4..1}`` fuse from the deepest
level (``resConfUnit{1,2}.conv{1,2}`` / ``.bn{1,2}``, ``out_conv``); ``scratch.output_conv`` is the head and
``auxlayer`` the segmentation model's auxiliary head.

``dpt_hybrid_config(task)`` is the model config of the released DPT-Hybrid models, ``load_official_dpt(model,
checkpoint)`` loads such a checkpoint into a model built here.
"""
from __future__ import annotations

import re

from zoo.weights import load_pretrained, read_state_dict
from zoo.weights.rename import rename_keys
from zoo.weights.timm import vit_from_timm

HALF_255 = (127.5, 127.5, 127.5)  # the official transforms: NormalizeImage(mean=0.5, std=0.5) on 0-1 images

_RULES = [
    (r'^pretrained\.act_postprocess(\d)\.0\.project\.0\.',
     lambda m: f'neck.reassemble.{int(m[1]) - 1}.readout.project.0.'),
    (r'^pretrained\.act_postprocess(\d)\.3\.', lambda m: f'neck.reassemble.{int(m[1]) - 1}.proj.'),
    (r'^pretrained\.act_postprocess(\d)\.4\.', lambda m: f'neck.reassemble.{int(m[1]) - 1}.resample.'),
    (r'^scratch\.layer(\d)_rn\.', lambda m: f'neck.convs.{int(m[1]) - 1}.'),
    (r'^scratch\.refinenet(\d)\.', lambda m: f'neck.fusion.{4 - int(m[1])}.'),
    (r'\.resConfUnit(\d)\.conv(\d)\.', r'.res\1.conv\2.'), (r'\.resConfUnit(\d)\.bn(\d)\.', r'.res\1.bn\2.'),
    (r'^(neck\.fusion\.\d+)\.out_conv\.', r'\1.proj.'),
    (r'^scratch\.output_conv\.', 'decode_head.head.'),
    (r'^auxlayer\.', 'auxiliary_head.head.'),
]
_BLOCK = re.compile(r'^backbone\.blocks\.(\d+)\.')
_UNUSED = ('backbone.norm.', 'backbone.head.', 'backbone.fc_norm.')  # DPT taps blocks before the final norm


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


def convert_official_dpt_state(state: dict, num_blocks: int) -> dict:
    """An official DPT state dict (module docstring) in our keys; blocks from ``num_blocks`` on (after the last tap)
    and the ViT's final norm and head are dropped."""
    encoder = {k[len('pretrained.model.'):]: v for k, v in state.items() if k.startswith('pretrained.model.')}
    if not encoder:
        raise ValueError("no 'pretrained.model.' keys: not an official DPT checkpoint (isl-org/DPT)")
    ours = {f'backbone.{k}': v for k, v in vit_from_timm(encoder).items()}
    ours.update(rename_keys({k: v for k, v in state.items() if not k.startswith('pretrained.model.')}, _RULES))
    return {k: v for k, v in ours.items() if not k.startswith(_UNUSED)
            and not (_BLOCK.match(k) and int(_BLOCK.match(k)[1]) >= num_blocks)}


def load_official_dpt(model, checkpoint):
    """Load an official DPT checkpoint (a path or state dict) into a DPT model built here (e.g. from
    :func:`dpt_hybrid_config`); returns zoo's load report (a misfit is an error naming the keys)."""
    state = convert_official_dpt_state(read_state_dict(checkpoint), len(model.backbone.blocks))
    return load_pretrained(model, state, format='zoo', name=None if isinstance(checkpoint, dict) else str(checkpoint))
