"""The authors' whole-model layouts -> this project's DPT task models.

isl-org/DPT (``DPTSegmentationModel`` / ``DPTDepthModel``, also DPT-Hybrid): ``pretrained.model.*`` is timm's ViT
(for DPT-Hybrid its ``vit_base_resnet50_384``, the BiT ResNet under ``patch_embed.backbone``);
``pretrained.act_postprocess{1..4}`` reassemble the four levels (``.0.project.0`` the readout Linear, ``.3`` the 1x1
projection, ``.4`` the resampling; DPT-Hybrid's first two are Identity); ``scratch.*`` the fusion
(:func:`.dpt_names.isl_fusion_rules`); ``scratch.output_conv`` the head and ``auxlayer`` the segmentation model's
auxiliary head.

Depth Anything V2 (DepthAnything/Depth-Anything-V2, the metric-depth checkpoints too): ``pretrained.*`` is the
DINOv2 encoder (:func:`zoo.weights.dinov2.dinov2_from_official`), ``depth_head.*`` the DPT head: ``projects``,
``resize_layers`` and ``readout_projects`` reassemble, ``scratch.*`` fuses as isl-org's, ``scratch.output_conv1`` /
``output_conv2.{0,2}`` are the depth head's three convs.
"""
from __future__ import annotations

import re

from zoo.weights.dinov2 import dinov2_from_official
from zoo.weights.rename import rename_keys
from zoo.weights.timm import vit_from_timm

from .dpt_names import isl_fusion_rules, keep_backbone_blocks

_DPT_RULES = [
    (r'^pretrained\.act_postprocess(\d)\.0\.project\.0\.',
     lambda m: f'neck.reassemble.{int(m[1]) - 1}.readout.project.0.'),
    (r'^pretrained\.act_postprocess(\d)\.3\.', lambda m: f'neck.reassemble.{int(m[1]) - 1}.proj.'),
    (r'^pretrained\.act_postprocess(\d)\.4\.', lambda m: f'neck.reassemble.{int(m[1]) - 1}.resample.'),
    *isl_fusion_rules(),
    (r'^scratch\.output_conv\.', 'decode_head.head.'),
    (r'^auxlayer\.', 'auxiliary_head.head.'),
]
_DPT_UNUSED = ('backbone.head.', 'backbone.fc_norm.')  # DPT taps blocks before the final norm (dropped too)



def depth_anything_head_rules(prefix: str = 'depth_head.') -> list:
    """Depth Anything's DPT head under ``prefix`` (V2: ``depth_head.``; Video Depth Anything: ``head.``) -> our neck
    and depth head (module docstring)."""
    head = re.escape(prefix)
    return [
        (rf'^{head}projects\.(\d+)\.', lambda m: f'neck.reassemble.{m[1]}.proj.'),
        (rf'^{head}resize_layers\.(\d+)\.', lambda m: f'neck.reassemble.{m[1]}.resample.'),
        (rf'^{head}readout_projects\.(\d+)\.0\.', lambda m: f'neck.reassemble.{m[1]}.readout.project.0.'),
        *isl_fusion_rules(prefix),
        (rf'^{head}scratch\.output_conv1\.', 'decode_head.conv1.'),
        (rf'^{head}scratch\.output_conv2\.0\.', 'decode_head.conv2.'),
        (rf'^{head}scratch\.output_conv2\.2\.', 'decode_head.conv3.'),
    ]


_DEPTH_ANYTHING_RULES = depth_anything_head_rules('depth_head.')


def _split(state: dict, prefix: str, source: str) -> tuple[dict, dict]:
    """The encoder (keys under ``prefix``, without it) and the rest; an error when there is no encoder."""
    encoder = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if not encoder:
        raise ValueError(f"no '{prefix}' keys: not an official {source}")
    return encoder, {k: v for k, v in state.items() if not k.startswith(prefix)}


def convert_official_dpt_state(state: dict, num_blocks: int) -> dict:
    """An official DPT state dict (module docstring) in our keys; blocks from ``num_blocks`` on (after the last tap)
    and the ViT's final norm and head are dropped."""
    encoder, rest = _split(state, 'pretrained.model.', 'DPT checkpoint (isl-org/DPT)')
    ours = {f'backbone.{k}': v for k, v in vit_from_timm(encoder).items()}
    ours.update(rename_keys(rest, _DPT_RULES))
    return {k: v for k, v in keep_backbone_blocks(ours, num_blocks, tap_norm=False).items()
            if not k.startswith(_DPT_UNUSED)}


def convert_official_depth_anything_state(state: dict, num_blocks: int) -> dict:
    """An official Depth Anything V2 state dict (``pretrained.*``, ``depth_head.*``) in our keys."""
    encoder, head = _split(state, 'pretrained.', 'Depth Anything V2 checkpoint')
    ours = {f'backbone.{k}': v for k, v in dinov2_from_official(encoder).items()}
    ours.update(rename_keys(head, _DEPTH_ANYTHING_RULES))
    return keep_backbone_blocks(ours, num_blocks)


def is_official_dpt(state: dict) -> bool:
    """Whether ``state`` is an isl-org/DPT model's: its ViT under ``pretrained.model.``, and every key under
    ``pretrained.``, ``scratch.`` or ``auxlayer.``."""
    keys = [k for k in state if isinstance(k, str)]
    return len(keys) == len(state) and any(k.startswith('pretrained.model.') for k in keys) and \
        all(k.startswith(('pretrained.', 'scratch.', 'auxlayer.')) for k in keys)


def is_official_depth_anything(state: dict) -> bool:
    """Whether ``state`` is a Depth Anything V2 model's: keys under ``pretrained.`` (the encoder) and ``depth_head.``,
    and no other."""
    keys = [k for k in state if isinstance(k, str)]
    return len(keys) == len(state) and any(k.startswith('pretrained.') for k in keys) and \
        any(k.startswith('depth_head.') for k in keys) and \
        all(k.startswith(('pretrained.', 'depth_head.')) for k in keys)


def dpt_from_official(state: dict, model) -> dict:
    """:func:`convert_official_dpt_state` for ``model`` (its blocks after the last tap dropped)."""
    return convert_official_dpt_state(state, len(model.backbone.blocks))


def depth_anything_from_official(state: dict, model) -> dict:
    """:func:`convert_official_depth_anything_state` for ``model`` (its blocks after the last tap dropped)."""
    return convert_official_depth_anything_state(state, len(model.backbone.blocks))
