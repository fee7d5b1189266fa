"""timm's PiT and LeViT key layouts -> this project's (:mod:`zoo.backbones.pit`, :mod:`zoo.backbones.levit`)."""
from __future__ import annotations

import re

import torch
from einops import rearrange

from .rename import rename_keys

_PIT_RULES = [(r'^patch_embed\.conv\.', 'patch_embed.proj.'), (r'^transformers\.', 'stages.')]


def pit_from_timm(state: dict) -> dict:
    """timm PiT: the position table '1 d h w' becomes '1 (h w) d', the prefix tokens '1 p d' split into CLS and
    distillation tokens."""
    out = {}
    for key, value in rename_keys(state, _PIT_RULES).items():
        if key == 'pos_embed' and value.ndim == 4:
            out['pos_embed.weight'] = rearrange(value, '1 d h w -> 1 (h w) d')
        elif key == 'cls_token':
            out['prefix.cls'] = value[:, :1]
            if value.shape[1] > 1:
                out['prefix.dist'] = value[:, 1:2]
        else:
            out[key] = value
    return out


_LEVIT_RULES = [(r'^stem\.conv(\d)\.linear\.', lambda m: f'stem.{int(m.group(1)) - 1}.conv.'),
                (r'^stem\.conv(\d)\.bn\.', lambda m: f'stem.{int(m.group(1)) - 1}.norm.'),
                (r'\.downsample\.attn_downsample\.', '.downsample.attn.'),
                (r'\.attention_biases$', '.pos_bias.table'),
                (r'\.attn\.qkv\.', '.attn.qkv.proj.'), (r'\.attn\.kv\.', '.attn.qkv.kv.'),
                (r'\.attn\.q\.ln\.', '.attn.qkv.q.'),
                (r'\.bn\.', '.norm.')]
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
        heads = out[f'{attn}.pos_bias.table'].shape[0]
        v = out[f'{attn}.proj.ln.linear.weight'].shape[1] // heads
        rows = out[key].shape[0] // heads
        if key.endswith('.proj.linear.weight'):
            widths = [(rows - v) // 2, (rows - v) // 2, v]
        else:
            widths = [rows - v, v]
        order = _per_part_rows(heads, widths)
        prefix = key[:-len('linear.weight')]
        out[key] = out[key][order]
        for name in _BN_ROWS:
            if f'{prefix}norm.{name}' in out:
                out[f'{prefix}norm.{name}'] = out[f'{prefix}norm.{name}'][order]
    return out
