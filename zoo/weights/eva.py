"""timm's EVA layout (its RoPE ViTs: ``vit_*_rope*``) -> this project's ViT keys.

timm builds its rotary-position ViTs in the EVA model, which differs from its plain ViT only in names:
LayerScale ``gamma_1``/``gamma_2`` (ours ``ls1.gamma``/``ls2.gamma``); EVA attention's ``q_bias``/``v_bias`` beside
a bias-free fused ``qkv`` (ours inside it: :class:`zoo.core.qkv.QVBiasQKV`); and the mixed
RoPE frequencies of all blocks in one ``rope.freqs`` '2 depth heads (d/2)' (ours one '2 heads (d/2)' per block,
``blocks.i.attn.rope.freqs``).
"""
from __future__ import annotations

import re

from .layout_error import CheckpointLayoutError, of_rank
from .rename import rename_keys, rules

_RULES = rules(r"""
    \.gamma_1$            -> .ls1.gamma
    \.gamma_2$            -> .ls2.gamma
    \.attn\.([qv])_bias$  -> .attn.qkv.\1_bias
""")


def is_eva_layout(state: dict) -> bool:
    return any(k.endswith(('.gamma_1', '.attn.q_bias')) or k == 'rope.freqs' for k in state)


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
    return rename_keys(state, _RULES)
