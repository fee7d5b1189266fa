"""Swin V1 / V2 checkpoints -> :mod:`zoo.backbones.swin`: timm's layout and the official one
(microsoft/Swin-Transformer).

Both name blocks ``layers.{i}.blocks.{j}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}`` as we do. They differ in:

- the official code merges patches at the end of stage i (``layers.{i}.downsample``), timm at the start of stage
  i + 1, as we do; the classifier is ``head`` (official) or ``head.fc`` (timm);
- V1's bias table ``attn.relative_position_bias_table`` '(dy dx) heads' becomes ``attn.pos_bias.table``
  'heads dy dx' (the reference's windows are square);
- V2's ``attn.cpb_mlp.{0,2}`` become ``attn.pos_bias.mlp.fc{1,2}``, ``attn.q_bias`` / ``attn.v_bias`` the qkv's,
  ``attn.logit_scale`` stays;
- buffers (``relative_position_index``, ``relative_coords_table``, ``attn_mask``) are dropped.
"""
from __future__ import annotations

import re

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
