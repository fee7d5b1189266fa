"""timm's EVA layout (its RoPE ViTs: ``vit_*_rope*``) -> this project's ViT keys.

timm builds its rotary-position ViTs in the EVA model, which differs from its plain ViT only in names:
LayerScale ``gamma_1``/``gamma_2`` (ours ``ls1.gamma``/``ls2.gamma``); EVA attention's ``q_bias``/``v_bias`` beside
a bias-free fused ``qkv`` (ours inside it: :class:`zoo.core.qkv.QVBiasQKV`); and the mixed
RoPE frequencies of all blocks in one ``rope.freqs`` '2 depth heads (d/2)' (ours one '2 heads (d/2)' per block,
``blocks.i.attn.rope.freqs``).

EVA-02 adds: separate ``attn.q_proj``/``k_proj``/``v_proj`` (base and large; k without bias), fused here into the
one q/v-bias projection; the SwiGLU's separate gate and value Linears ``mlp.fc1_g``/``mlp.fc1_x``, packed here as
:class:`zoo.core.Mlp` ``gated`` [gate | value] in ``mlp.fc1``; the MLP's norm ``mlp.norm`` (its ``norm`` part, same
key); EVA-02 CLIP's norm before the attention's projection ``attn.norm`` (ours ``attn.proj.norm``, a
:class:`zoo.core.PreNormLinear`).
"""
from __future__ import annotations

import re

import torch

from .layout_error import CheckpointLayoutError, gather_qkv, of_rank, pack_swiglu, stacked
from .rename import rename_keys, rules

_RULES = rules(r"""
    \.gamma_1$            -> .ls1.gamma
    \.gamma_2$            -> .ls2.gamma
    \.attn\.([qv])_bias$  -> .attn.qkv.\1_bias
    \.attn\.norm\.        -> .attn.proj.norm.
""")
_SEPARATE_QKV = re.compile(r'^(?P<layer>.+\.attn)\.(?P<part>[qkv])_proj\.(?P<kind>weight|bias)$')
_EVA02_KEYS = re.compile(r'(^|\.)blocks\.\d+\.(attn\.q_proj|mlp\.fc1_g)\.weight$')
_RESAVE = "re-save the checkpoint from timm's EVA model (eva02_*) of the same name"


def _fuse(parts: dict, layer: str, kind: str, names: tuple[str, ...], what: str) -> torch.Tensor:
    return stacked(parts, names, lambda name: f'{layer}.{name}.{kind}', what, _RESAVE)


def _fuse_eva02(state: dict) -> dict:
    """Separate q/k/v projections -> the fused weight and q/v biases; SwiGLU's fc1_g/fc1_x -> packed fc1."""
    state, qkv = gather_qkv(state, _SEPARATE_QKV)
    for (layer, kind), parts in qkv.items():
        names = {k: f'{k}_proj' for k in parts}
        parts = {names[k]: v for k, v in parts.items()}
        if kind == 'weight':
            state[f'{layer}.qkv.weight'] = _fuse(parts, layer, kind, ('q_proj', 'k_proj', 'v_proj'),
                                                 "EVA-02's query, key and value projections")
            continue
        if 'k_proj' in parts:
            raise CheckpointLayoutError(f'{layer}.k_proj.bias', "EVA's attention has no key bias (q and v only)",
                                        _RESAVE)
        _fuse(parts, layer, kind, ('q_proj', 'v_proj'), "EVA-02's query and value biases")
        state[f'{layer}.q_bias'], state[f'{layer}.v_bias'] = parts['q_proj'], parts['v_proj']
    return pack_swiglu(state, 'fc1_g', 'fc1_x', _RESAVE)


def is_eva_layout(state: dict) -> bool:
    return any(k.endswith(('.gamma_1', '.attn.q_bias')) or k == 'rope.freqs' or _EVA02_KEYS.search(k) for k in state)


def eva_to_vit(state: dict) -> dict:
    """EVA keys -> timm-ViT keys (which :func:`zoo.weights.timm.vit_from_timm` then renames)."""
    state = dict(state)
    freqs = state.pop('rope.freqs', None)
    if freqs is not None:  # '2 depth heads (d/2)' -> per block '2 heads (d/2)'
        fix = ("timm's mixed-RoPE ViTs (vit_*_rope_mixed*) save the x and y frequencies of all blocks in it; "
               "re-save the checkpoint from such a model, or give each block its own blocks.N.attn.rope.freqs "
               "'2 heads (d/2)'")
        of_rank(freqs, 'rope.freqs', '2 depth heads (d/2)', fix)
        if freqs.shape[0] != 2:
            raise CheckpointLayoutError('rope.freqs', f"the first dimension holds the x and y frequencies (2), got "
                                                      f"shape {tuple(freqs.shape)}", fix)
        for i in range(freqs.shape[1]):
            state[f'blocks.{i}.attn.rope.freqs'] = freqs[:, i].clone()
    state = {k: v for k, v in state.items() if not re.search(r'(^|\.)rope\.(pos_embed|bands|t_x|t_y)$', k)}
    return rename_keys(_fuse_eva02(state), _RULES)
