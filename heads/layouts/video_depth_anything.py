"""Video Depth Anything's checkpoints (DepthAnything/Video-Depth-Anything: ``video_depth_anything_vit{s,b,l}.pth``
and the metric ones) -> :class:`heads.models.video_depth_anything.VideoDepthEstimator` keys: the ``'Video Depth
Anything'`` row of :data:`heads.layouts.table.LAYOUTS`.

``pretrained.*`` is the DINOv2 encoder (:func:`zoo.weights.dinov2.dinov2_from_official`), ``head.*`` Depth Anything
V2's DPT head (:func:`.official.depth_anything_head_rules`) with ``head.motion_modules.{m}.temporal_transformer.*``,
the neck's temporal modules (:class:`heads.necks.TemporalModule`): ``norm``, ``proj_in``, ``proj_out``;
``transformer_blocks.{i}``: ``attention_blocks.{k}.to_{q,k,v}`` (fused here) and ``to_out.0``, ``norms.{k}``,
``ff_norm``, the GEGLU ``ff.net.0.proj`` (rows [value | gate], swapped to our [gate | value]) and ``ff.net.2``.
Each attention's ``pos_encoder.pe`` (the frames' sin-cos table) is checked to be the model's, not loaded.
"""
from __future__ import annotations

import re

import torch

from zoo.core import sincos_1d
from zoo.weights import CheckpointLayoutError
from zoo.weights.dinov2 import dinov2_from_official
from zoo.weights.layout_error import gather_qkv, stacked
from zoo.weights.rename import rename_keys, rules

from .dpt_names import keep_backbone_blocks
from .official import depth_anything_head_rules

_TEMPORAL = [
    (r'^head\.motion_modules\.(\d+)\.temporal_transformer\.', lambda m: f'neck.temporal.{m[1]}.'),
    *rules(r"""
        \.transformer_blocks\.(\d+)\.                   -> .blocks.\1.
        \.attention_blocks\.(\d+)\.to_out\.0\.          -> .attns.\1.proj.
        \.attention_blocks\.(\d+)\.                   -> .attns.\1.
        \.ff\.net\.0\.proj\.                            -> .ff.fc1.
        \.ff\.net\.2\.                                  -> .ff.fc2.
    """),
]
_QKV = re.compile(r'^(?P<layer>head\.motion_modules\.\d+\.temporal_transformer\.transformer_blocks\.\d+\.'
                  r'attention_blocks\.\d+)\.(?P<part>to_[qkv])\.(?P<kind>weight)$')
_PE = re.compile(r'^head\.motion_modules\.\d+\.temporal_transformer\.transformer_blocks\.\d+\.attention_blocks\.\d+\.'
                 r'pos_encoder\.pe$')
FIX = "Video Depth Anything's model saves it so; save the model's state_dict again"


def is_video_depth_anything(state: dict) -> bool:
    """Keys under ``pretrained.`` (the encoder) and ``head.`` only, the head with temporal modules."""
    keys = [k for k in state if isinstance(k, str)]
    return len(keys) == len(state) and any(k.startswith('pretrained.') for k in keys) and \
        any(k.startswith('head.motion_modules.') for k in keys) and \
        all(k.startswith(('pretrained.', 'head.')) for k in keys)


def _check_frame_table(key: str, table: torch.Tensor, frames: int) -> None:
    """The file's frame positions '1 t c' must be the model's: the sin-cos table of ``frames`` frames."""
    if table.ndim != 3 or table.shape[1] != frames or \
            not torch.allclose(table[0].float(), sincos_1d(frames, table.shape[-1]), atol=1e-5):
        raise CheckpointLayoutError(key, f"a frame position table of shape {tuple(table.shape)} that is not the "
                                    f"sin-cos table of the model's {frames} frames (max_frames)",
                                    "Build the model with the checkpoint's max_frames (the released models: 32)")


def video_depth_anything_from_official(state: dict, model) -> dict:
    """The authors' keys (module docstring) -> ours for ``model`` (its blocks after the last tap dropped)."""
    frames = model.neck.temporal[0].blocks[0].pe.shape[1]
    encoder = {k[len('pretrained.'):]: v for k, v in state.items() if k.startswith('pretrained.')}
    head, qkv = gather_qkv({k: v for k, v in state.items() if k.startswith('head.')}, _QKV)
    for key in [k for k in head if _PE.match(k)]:
        _check_frame_table(key, head.pop(key), frames)
    for key in [k for k in head if k.endswith('.ff.net.0.proj.weight') or k.endswith('.ff.net.0.proj.bias')]:
        value, gate = head[key].chunk(2, dim=0)  # GEGLU: [value | gate] -> Mlp's [gate | value]
        head[key] = torch.cat([gate, value])
    ours = {f'backbone.{k}': v for k, v in dinov2_from_official(encoder).items()}
    ours.update(rename_keys(rename_keys(head, _TEMPORAL), depth_anything_head_rules('head.')))
    for (layer, kind), parts in qkv.items():
        name = rename_keys({f'{layer}.qkv.{kind}': None}, _TEMPORAL).popitem()[0]
        ours[name] = stacked(parts, ('to_q', 'to_k', 'to_v'), lambda part: f'{layer}.{part}.{kind}',
                             "the temporal attention's query, key and value", FIX)
    return keep_backbone_blocks(ours, len(model.backbone.blocks))
