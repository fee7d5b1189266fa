"""timm's PiT and LeViT key layouts -> this project's (:mod:`zoo.backbones.pit`, :mod:`zoo.backbones.levit`)."""
from __future__ import annotations

import re

import torch
from einops import rearrange

from .layout_error import CheckpointLayoutError, of_rank, required
from .rename import rename_keys, rules

_PIT_RULES = [(r'^patch_embed\.conv\.', 'patch_embed.proj.'), (r'^transformers\.', 'stages.')]


def pit_from_timm(state: dict) -> dict:
    """timm PiT: the position table '1 d h w' becomes '1 (h w) d' when square; a non-square one stays '1 d h w', so
    that its grid, which the flattened rows would not tell, is read off it when it is resampled
    (:meth:`zoo.core.LearnedPosEmbed.resample_checkpoint`); the prefix tokens '1 p d' split into CLS and
    distillation tokens."""
    out = {}
    for key, value in rename_keys(state, _PIT_RULES).items():
        if key == 'pos_embed' and value.ndim == 4 and value.shape[0] == 1 and value.shape[2] == value.shape[3]:
            out['pos_embed.weight'] = rearrange(value, '1 d h w -> 1 (h w) d')
        elif key == 'pos_embed':
            out['pos_embed.weight'] = value
        elif key == 'cls_token':
            of_rank(value, key, '1 p d', "timm's PiT saves its CLS (and distillation) token as cls_token '1 p d'; "
                                         "use the checkpoint as timm saved it")
            out['prefix.cls'] = value[:, :1]
            if value.shape[1] > 1:
                out['prefix.dist'] = value[:, 1:2]
        else:
            out[key] = value
    return out


_LEVIT_RULES = [
    (r'^stem\.conv(\d)\.linear\.', lambda m: f'stem.{int(m.group(1)) - 1}.conv.'),
    (r'^stem\.conv(\d)\.bn\.', lambda m: f'stem.{int(m.group(1)) - 1}.norm.'),
    *rules(r"""
        \.downsample\.attn_downsample\.  -> .downsample.attn.
        \.attention_biases$              -> .pos_bias.table
        \.attn\.qkv\.                    -> .attn.qkv.proj.
        \.attn\.kv\.                     -> .attn.qkv.kv.
        \.attn\.q\.ln\.                  -> .attn.qkv.q.
        \.bn\.                           -> .norm.
    """),
]
_BN_ROWS = ('weight', 'bias', 'running_mean', 'running_var')


def _per_part_rows(heads: int, widths: list[int]) -> torch.Tensor:
    """Row order taking '(heads (w0 + w1 + ...))' (timm: each head's parts together) to '(w0 heads) (w1 heads) ...'
    (ours: each part's heads together)."""
    total, starts = sum(widths), [sum(widths[:i]) for i in range(len(widths))]
    return torch.cat([torch.arange(w) + start + h * total for start, w in zip(starts, widths) for h in range(heads)])


def levit_from_timm(state: dict) -> dict:
    """timm LeViT (linear or 1x1-conv form): BN'd Linears keep ``linear`` and name their BN ``norm``; the fused q/k/v
    (and the downsampling k/v) rows are regrouped per part, with the head count read off the bias table and the
    widths off the projections."""
    state = {k: v for k, v in state.items() if not k.endswith('attention_bias_idxs')}
    out = {}
    for key, value in rename_keys(state, _LEVIT_RULES).items():
        if key.endswith('.linear.weight') and value.ndim == 4 and not key.startswith('stem.'):
            value = value.flatten(1)  # 1x1 conv -> Linear
        out[key] = value
    for key in [k for k in out if re.search(r'\.attn\.qkv\.(proj|kv)\.linear\.weight$', k)]:
        attn = key.split('.qkv.')[0]
        heads, v = _heads_and_value_width(out, attn)
        weight = of_rank(out[key], _timm_name(key), 'rows in', _LEVIT_FIX)
        rows = weight.shape[0] // heads
        widths = [(rows - v) // 2, (rows - v) // 2, v] if key.endswith('.proj.linear.weight') else [rows - v, v]
        if weight.shape[0] % heads or min(widths) < 1:
            raise CheckpointLayoutError(_timm_name(key), f"{weight.shape[0]} rows cannot be {heads} heads of "
                                                         f"query, key and value parts (value width {v})", _LEVIT_FIX)
        order = _per_part_rows(heads, widths)
        prefix = key[:-len('linear.weight')]
        out[key] = weight[order]
        for bn in [f'{prefix}norm.{name}' for name in _BN_ROWS if f'{prefix}norm.{name}' in out]:
            rows = of_rank(out[bn], _timm_name(bn), 'rows', _LEVIT_FIX)
            if len(rows) != weight.shape[0]:
                raise CheckpointLayoutError(_timm_name(bn), f"{len(rows)} rows beside a projection of "
                                                            f"{weight.shape[0]}", _LEVIT_FIX)
            out[bn] = rows[order]
    return out


_LEVIT_FIX = "timm's LeViT (levit_* or levit_conv_*) saves it so; use the checkpoint as timm saved it"


def _timm_name(key: str) -> str:
    """What timm calls our LeViT ``key`` (for messages)."""
    for ours, theirs in (('.pos_bias.table', '.attention_biases'), ('.qkv.proj.', '.qkv.'), ('.qkv.kv.', '.kv.'),
                         ('.downsample.attn.', '.downsample.attn_downsample.'), ('.norm.', '.bn.')):
        key = key.replace(ours, theirs)
    return key


def _heads_and_value_width(out: dict, attn: str) -> tuple[int, int]:
    """An attention's head count (its bias table's rows) and value width per head (its output projection's input)."""
    table_key, proj_key = f'{attn}.pos_bias.table', f'{attn}.proj.ln.linear.weight'
    table = of_rank(required(out, table_key, "timm's LeViT", 'its rows give the head count', _timm_name(table_key)),
                    _timm_name(table_key), 'heads offsets', _LEVIT_FIX)
    proj = of_rank(required(out, proj_key, "timm's LeViT", "its input width gives the value width",
                            _timm_name(proj_key)), _timm_name(proj_key), 'out in', _LEVIT_FIX)
    heads = table.shape[0]
    if heads < 1 or proj.shape[1] < heads:
        raise CheckpointLayoutError(_timm_name(f'{attn}.pos_bias.table'), f"{heads} heads (its rows) for an output "
                                    f"projection of {proj.shape[1]} inputs", _LEVIT_FIX)
    return heads, proj.shape[1] // heads
