"""transformers' ``Mask2FormerForUniversalSegmentation`` state dicts -> this project's
:class:`heads.models.mask2former.Mask2Former` keys (the ``'transformers mask2former'`` row of
:data:`heads.layouts.table.LAYOUTS`).

The Swin backbone (``model.pixel_level_module.encoder.*``) goes through :func:`zoo.weights.swin.swin_from_hf`;
:func:`convert_mask2former_head_state` renames the pixel decoder's, the transformer decoder's and the class head's
keys (the cross-attention's packed ``in_proj`` split into q, k, v); the loss's ``criterion.*`` buffers are dropped.
"""
from __future__ import annotations

import re

import torch

from zoo.weights.layout_error import CheckpointLayoutError
from zoo.weights.rename import rename_keys, rules
from zoo.weights.swin import swin_from_hf

BACKBONE = 'model.pixel_level_module.encoder.'

HEAD_RULES = rules(r"""
    ^model\.pixel_level_module\.decoder\.                        -> pixel_decoder.
    ^pixel_decoder\.input_projections\.                          -> pixel_decoder.input_proj.
    ^pixel_decoder\.encoder\.layers\.(\d+)\.self_attn\.           -> pixel_decoder.layers.\1.attn.
    ^pixel_decoder\.encoder\.layers\.(\d+)\.self_attn_layer_norm\. -> pixel_decoder.layers.\1.norm1.
    ^pixel_decoder\.encoder\.layers\.(\d+)\.(fc\d)\.               -> pixel_decoder.layers.\1.mlp.\2.
    ^pixel_decoder\.encoder\.layers\.(\d+)\.final_layer_norm\.     -> pixel_decoder.layers.\1.norm2.
    ^pixel_decoder\.mask_projection\.                             -> pixel_decoder.mask_proj.
    ^model\.transformer_module\.                                  -> decoder.
    ^decoder\.queries_embedder\.weight$                           -> decoder.query_pos
    ^decoder\.queries_features\.weight$                           -> decoder.query_feat
    ^decoder\.level_embed\.weight$                                -> decoder.level_embed
    ^decoder\.input_projections\.                                 -> decoder.input_proj.
    ^decoder\.decoder\.layers\.(\d+)\.self_attn\.([qkv])_proj\.    -> decoder.layers.\1.self_attn.qkv.\2.
    ^decoder\.decoder\.layers\.(\d+)\.(self|cross)_attn\.out_proj\. -> decoder.layers.\1.\2_attn.proj.
    ^decoder\.decoder\.layers\.(\d+)\.(self|cross)_attn_layer_norm\. -> decoder.layers.\1.\2_norm.
    ^decoder\.decoder\.layers\.(\d+)\.(fc\d)\.                     -> decoder.layers.\1.mlp.\2.
    ^decoder\.decoder\.layers\.(\d+)\.final_layer_norm\.           -> decoder.layers.\1.mlp_norm.
    ^decoder\.decoder\.layers\.                                    -> decoder.layers.
    ^decoder\.decoder\.layernorm\.                                 -> decoder.norm.
    ^class_predictor\.                                             -> decoder.class_head.
""")
_ADAPTER = re.compile(r'^pixel_decoder\.(adapter|layer)_(\d+)\.')
_MASK_MLP = re.compile(r'^decoder\.decoder\.mask_predictor\.mask_embedder\.(\d+)\.0\.')
_IN_PROJ = re.compile(r'^(decoder\.layers\.\d+\.cross_attn)\.in_proj_(weight|bias)$')


def convert_mask2former_head_state(state: dict) -> dict:
    """transformers' Mask2Former keys (all but the backbone's, ``model.pixel_level_module.encoder.*``) -> ours
    (``pixel_decoder.*``, ``decoder.*``); the loss's ``criterion.*`` buffers are dropped."""
    head = {k: v for k, v in state.items() if not k.startswith((BACKBONE, 'criterion.'))}
    out = {}
    renamed = rename_keys(head, HEAD_RULES)  # one key per key, in order: zip names each key's key in the file
    for theirs, (key, value) in zip(head, renamed.items()):
        key = _ADAPTER.sub(lambda m: f"pixel_decoder.{'lateral' if m[1] == 'adapter' else 'output'}."
                                     f"{int(m[2]) - 1}.", key)
        key = _MASK_MLP.sub(lambda m: f"decoder.mask_embed.{2 * int(m[1])}.", key)
        packed = _IN_PROJ.match(key)
        if packed:  # nn.MultiheadAttention's [q | k | v] rows
            if value.shape[0] % 3:
                raise CheckpointLayoutError(theirs, f"a packed in_proj has 3 * width rows, got {tuple(value.shape)}",
                                            "Use the checkpoint transformers' save_pretrained wrote")
            for name, part in zip('qkv', value.chunk(3)):
                out[f"{packed[1]}.qkv.{name}.{packed[2]}"] = part
            continue
        out[key] = value
    return out


def convert_mask2former_state(state: dict, model: torch.nn.Module) -> dict:
    """A transformers Mask2Former state dict -> ours: the Swin backbone's keys through
    :func:`zoo.weights.swin.swin_from_hf` (its classifier norm, unused by a backbone, dropped), the rest through
    :func:`convert_mask2former_head_state`."""
    swin = swin_from_hf({k[len(BACKBONE):]: v for k, v in state.items() if k.startswith(BACKBONE)})
    unused = tuple(getattr(model.backbone, 'classifier_only', ()))
    return {**{f'backbone.{k}': v for k, v in swin.items() if not k.startswith(unused)},
            **convert_mask2former_head_state(state)}
