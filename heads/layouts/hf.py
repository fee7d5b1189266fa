"""transformers' whole-model layouts -> this project's DPT task models.

``DPTForSemanticSegmentation`` / ``DPTForDepthEstimation`` (ViT or DPT-Hybrid backbone): ``dpt.embeddings.*``
(DPT-Hybrid: the BiT ResNet under ``dpt.embeddings.backbone.bit``), ``dpt.encoder.layer.{i}.*`` with separate
query/key/value Linears (fused into one qkv here), the neck and ``head`` (:data:`.dpt_names.HF_NECK_RULES`); the
final ``dpt.layernorm`` and ``dpt.pooler`` are unused (DPT taps blocks before them).

``DepthAnythingForDepthEstimation``: ``backbone.*`` is transformers' DINOv2 (:func:`zoo.weights.dinov2.dinov2_from_hf`),
the neck and head named as DPT's.
"""
from __future__ import annotations

import re

from zoo.weights.dinov2 import dinov2_from_hf
from zoo.weights.layout_error import fused_qkv, gather_qkv
from zoo.weights.rename import rename_keys, rules

from .dpt_names import HF_NECK_RULES, keep_backbone_blocks

_DPT_RULES = [
    *rules(r"""
        ^dpt\.embeddings\.cls_token$                             -> backbone.prefix.cls
        ^dpt\.embeddings\.position_embeddings$                   -> backbone.pos_embed.weight
        ^dpt\.embeddings\.patch_embeddings\.projection\.         -> backbone.patch_embed.proj.
        # DPT-Hybrid: a 1x1 conv of the BiT map, and the BiT ResNet
        ^dpt\.embeddings\.projection\.                           -> backbone.patch_embed.proj.
        ^dpt\.embeddings\.backbone\.bit\.                        -> backbone.patch_embed.backbone.
        \.backbone\.embedder\.convolution\.                      -> .backbone.stem.conv.
        \.backbone\.embedder\.norm\.                             -> .backbone.stem.norm.
        \.backbone\.encoder\.stages\.(\d+)\.layers\.(\d+)\.      -> .backbone.stages.\1.blocks.\2.
        ^dpt\.encoder\.layer\.(\d+)\.layernorm_before\.          -> backbone.blocks.\1.norm1.
        ^dpt\.encoder\.layer\.(\d+)\.layernorm_after\.           -> backbone.blocks.\1.norm2.
        ^dpt\.encoder\.layer\.(\d+)\.attention\.output\.dense\.  -> backbone.blocks.\1.attn.proj.
        ^dpt\.encoder\.layer\.(\d+)\.intermediate\.dense\.       -> backbone.blocks.\1.mlp.fc1.
        ^dpt\.encoder\.layer\.(\d+)\.output\.dense\.             -> backbone.blocks.\1.mlp.fc2.
    """),
    *HF_NECK_RULES,
]
_QKV = re.compile(r'^dpt\.encoder\.layer\.(?P<layer>\d+)\.attention\.attention\.(?P<part>query|key|value)\.'
                  r'(?P<kind>weight|bias)$')
_UNUSED = re.compile(r'^dpt\.(layernorm|pooler)\.')


def convert_hf_dpt_state(state: dict, num_blocks: int) -> dict:
    """HF DPT keys to ours; blocks from ``num_blocks`` on (after the last tap) are dropped."""
    out, qkv = gather_qkv({k: v for k, v in state.items() if not _UNUSED.match(k)}, _QKV)
    out = rename_keys(out, _DPT_RULES)
    for (block, kind), parts in qkv.items():
        layer = f'dpt.encoder.layer.{block}.attention.attention'
        out[f'backbone.blocks.{block}.attn.qkv.{kind}'] = fused_qkv(parts, layer, kind, 'DPT model')
    return keep_backbone_blocks(out, num_blocks)


def convert_hf_depth_anything_state(state: dict, num_blocks: int, tap_norm: bool = True) -> dict:
    """transformers' Depth Anything keys to ours; blocks after the last tap are dropped."""
    backbone = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    ours = {f'backbone.{k}': v for k, v in dinov2_from_hf(backbone).items()}
    ours.update(rename_keys({k: v for k, v in state.items() if not k.startswith('backbone.')}, HF_NECK_RULES))
    return keep_backbone_blocks(ours, num_blocks, tap_norm)


def dpt_from_hf(state: dict, model) -> dict:
    """:func:`convert_hf_dpt_state` for ``model`` (its blocks after the last tap dropped)."""
    return convert_hf_dpt_state(state, num_blocks=len(model.backbone.blocks))


def depth_anything_from_hf(state: dict, model) -> dict:
    """:func:`convert_hf_depth_anything_state` for ``model`` (its blocks and whether its taps go through the norm)."""
    return convert_hf_depth_anything_state(state, len(model.backbone.blocks), model.backbone.tap_norm)
