"""Swin V1 / V2 checkpoints -> :mod:`zoo.backbones.swin`: timm's layout, the official one
(microsoft/Swin-Transformer) and transformers' (``SwinModel`` / ``SwinBackbone`` / ``SwinForImageClassification``
and their V2 kin, as inside ``UperNetForSemanticSegmentation`` and ``Mask2FormerForUniversalSegmentation``).

Both name blocks ``layers.{i}.blocks.{j}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}`` as we do. They differ in:

- the official code merges patches at the end of stage i (``layers.{i}.downsample``), timm at the start of stage
  i + 1, as we do; the classifier is ``head`` (official) or ``head.fc`` (timm);
- V1's bias table ``attn.relative_position_bias_table`` '(dy dx) heads' becomes ``attn.pos_bias.table``
  'heads dy dx' (the reference's windows are square);
- V2's ``attn.cpb_mlp.{0,2}`` become ``attn.pos_bias.mlp.fc{1,2}``, ``attn.q_bias`` / ``attn.v_bias`` the qkv's,
  ``attn.logit_scale`` stays;
- buffers (``relative_position_index``, ``relative_coords_table``, ``attn_mask``) are dropped.

transformers' names (:func:`swin_from_hf`) are the official ones' with other words: ``encoder.layers.{i}`` (patch
merging at the end of stage i, as the official), ``layernorm_before`` / ``layernorm_after`` = ``norm1`` / ``norm2``,
separate ``query`` / ``key`` / ``value`` (or ``q_proj`` / ``k_proj`` / ``v_proj``) fused into ``attn.qkv`` (V2 has
no key bias: its query and value biases become ``q_bias`` / ``v_bias``), ``intermediate.dense`` / ``output.dense``
(or ``mlp.fc1`` / ``fc2``) the MLP, ``embeddings.patch_embeddings.projection`` / ``embeddings.norm`` the patch
embedding, ``layernorm`` the classifier's norm and ``classifier`` its head; a backbone's per-stage
``hidden_states_norms.stage{n}`` are our ``out_norms``, in stage order.
"""
from __future__ import annotations

import re

from .layout_error import CheckpointLayoutError, fused_qkv, gather_qkv
from .rename import heads_first_table, rename_keys, rules

_BUFFERS = ('relative_position_index', 'relative_coords_table', 'attn_mask')
_RULES = rules(r"""
    \.attn\.relative_position_bias_table$  -> .attn.pos_bias.table
    \.attn\.cpb_mlp\.0\.                   -> .attn.pos_bias.mlp.fc1.
    \.attn\.cpb_mlp\.2\.                   -> .attn.pos_bias.mlp.fc2.
    \.attn\.([qv])_bias$                   -> .attn.qkv.\1_bias
    ^head\.fc\.                            -> head.
""")


def swin_from_timm(state: dict) -> dict:
    """timm's Swin / Swin V2 keys (or the official ones, told apart by ``layers.0.downsample``) -> ours."""
    official = any(k.startswith('layers.0.downsample.') for k in state)
    out = {}
    for key, value in state.items():
        if key.endswith(_BUFFERS):
            continue
        if official:
            key = re.sub(r'^layers\.(\d+)\.downsample\.', lambda m: f'layers.{int(m.group(1)) + 1}.downsample.', key)
        out[key] = value
    out = rename_keys(out, _RULES)
    table, theirs = '.attn.pos_bias.table', '.attn.relative_position_bias_table'  # ours, and its name in the file
    return {k: heads_first_table(v, k.replace(table, theirs)) if k.endswith(table) else v for k, v in out.items()}


def swin_from_official(state: dict) -> dict:
    """microsoft/Swin-Transformer checkpoints (V1 and V2; ``model`` already unwrapped by the reader) -> ours."""
    return swin_from_timm(state)


_HF_RULES = rules(r"""
    ^(swin|swinv2)\.                                            ->
    ^embeddings\.patch_embeddings\.projection\.                 -> patch_embed.proj.
    ^embeddings\.norm\.                                          -> patch_embed.norm.
    ^encoder\.layers\.                                           -> layers.
    \.attention\.self\.(query|key|value)\.                      -> .attn.qkv_parts.\1.
    \.attention\.([qkv])_proj\.                                 -> .attn.qkv_parts.\1.
    \.attention\.(output\.dense|o_proj)\.                       -> .attn.proj.
    \.attention\.(self|relative_position_bias)\.relative_position_bias_table$  -> .attn.relative_position_bias_table
    \.attention\.self\.continuous_position_bias_mlp\.            -> .attn.cpb_mlp.
    \.attention\.self\.logit_scale$                             -> .attn.logit_scale
    \.layernorm_before\.                                         -> .norm1.
    \.layernorm_after\.                                          -> .norm2.
    \.(intermediate\.dense|mlp\.fc1)\.                           -> .mlp.fc1.
    \.(output\.dense|mlp\.fc2)\.                                 -> .mlp.fc2.
    ^layernorm\.                                                 -> norm.
    ^classifier\.                                                -> head.fc.
""")
_HF_QKV = re.compile(r'^(?P<layer>layers\.\d+\.blocks\.\d+)\.attn\.qkv_parts\.(?P<part>query|key|value|q|k|v)\.'
                     r'(?P<kind>weight|bias)$')
_STAGE_NORM = re.compile(r'^hidden_states_norms\.stage(\d+)\.')


def swin_from_hf(state: dict) -> dict:
    """transformers' Swin / Swin V2 keys (see the module docstring) -> ours, through the official layout."""
    state = rename_keys(state, _HF_RULES)
    stages = sorted({int(m[1]) for k in state if (m := _STAGE_NORM.match(k))})
    state = {_STAGE_NORM.sub(lambda m: f'out_norms.{stages.index(int(m[1]))}.', k): v for k, v in state.items()}
    out, parts = gather_qkv(state, _HF_QKV)
    for (layer, kind), qkv in parts.items():
        qkv = {dict(q='query', k='key', v='value').get(p, p): v for p, v in qkv.items()}
        prefix = f'encoder.{layer}.attention.self'
        if kind == 'bias' and 'key' not in qkv and f'{layer}.attn.cpb_mlp.0.weight' in state:
            if set(qkv) != {'query', 'value'}:  # V2: query and value biases, no key bias
                raise CheckpointLayoutError(f'{prefix}.query.bias', f'Swin V2 keeps query and value biases, got '
                                            f"{', '.join(sorted(qkv))}", 'save the model again with save_pretrained')
            out[f'{layer}.attn.q_bias'], out[f'{layer}.attn.v_bias'] = qkv['query'], qkv['value']
            continue
        out[f'{layer}.attn.qkv.{kind}'] = fused_qkv(qkv, prefix, kind, 'SwinModel')
    return swin_from_official(out)
