"""transformers' SigLIP / SigLIP 2 image tower -> :mod:`zoo.backbones.siglip` (the :mod:`zoo.backbones.vit` family).

``SiglipVisionModel`` (``vision_model.*``) or ``SiglipModel`` (its ``text_model.*``, ``logit_scale`` and
``logit_bias`` are left out): ``embeddings.patch_embedding``, ``embeddings.position_embedding`` (the table
'(h w) d', no class token), ``encoder.layers.N`` with ``self_attn.{q,k,v}_proj`` (fused here) and ``out_proj``,
``layer_norm1/2``, ``mlp.fc1/fc2``, ``post_layernorm``, and the MAP head ``head.*`` (``probe``, a
``torch.nn.MultiheadAttention`` whose ``in_proj`` rows [q | k | v] become :class:`zoo.core.ProbeQKV`'s ``q`` and
``kv``, ``layernorm``, ``mlp``) -> :class:`zoo.core.ProbePool`. timm's SigLIP files are its ViT layout
(:func:`zoo.weights.timm.vit_from_timm`).
"""
from __future__ import annotations

import re

from .io import CheckpointError
from .layout_error import fused_qkv, gather_qkv, of_rank, required
from .rename import rename_keys, rules

_RULES = rules(r"""
    ^vision_model\.                             ->
    ^embeddings\.patch_embedding\.              -> patch_embed.proj.
    ^embeddings\.position_embedding\.weight$    -> pos_embed.weight
    ^encoder\.layers\.(\d+)\.                   -> blocks.\1.
    \.self_attn\.out_proj\.                     -> .attn.proj.
    \.self_attn\.([qkv]_proj)\.                 -> .attn.\1.
    \.layer_norm(\d)\.                          -> .norm\1.
    ^post_layernorm\.                           -> norm.
    ^head\.probe$                               -> attn_pool.latent
    ^head\.attention\.out_proj\.                -> attn_pool.attn.proj.
    ^head\.layernorm\.                          -> attn_pool.norm.
    ^head\.mlp\.                                -> attn_pool.mlp.
""")
_QKV = re.compile(r'^(?P<layer>blocks\.\d+)\.attn\.(?P<part>[qkv]_proj)\.(?P<kind>weight|bias)$')
_NOT_VISION = ('text_model.', 'logit_scale', 'logit_bias')


def is_siglip_layout(state: dict) -> bool:
    """transformers' SigLIP vision keys: a patch embedding under ``embeddings.`` and no class embedding (CLIP's)."""
    return any(k.endswith('embeddings.patch_embedding.weight') for k in state) and \
        not any(k.endswith('embeddings.class_embedding') for k in state)


def siglip_from_hf(state: dict) -> dict:
    """transformers' SigLIP vision layout (see the module docstring) -> this project's ViT keys."""
    state = {k: v for k, v in state.items() if not k.startswith(_NOT_VISION) and not k.endswith('.position_ids')}
    if not is_siglip_layout(state):
        raise CheckpointError("not transformers' SigLIP vision layout (no 'embeddings.patch_embedding.weight', or a "
                              "CLIP 'embeddings.class_embedding'); load with format='auto'")
    root = 'vision_model.' if any(k.startswith('vision_model.') for k in state) else ''  # as the file names keys
    out, parts = gather_qkv(rename_keys(state, _RULES), _QKV)
    for (block, kind), qkv in parts.items():
        out[f'{block}.attn.qkv.{kind}'] = fused_qkv(qkv, f"{root}encoder.layers.{block.split('.')[1]}.self_attn",
                                                    kind, 'SiglipVisionModel', names=('q_proj', 'k_proj', 'v_proj'))
    fix = "transformers' SiglipVisionModel saves it so; save the model again with save_pretrained"
    table = f'{root}embeddings.position_embedding.weight'
    pos = required(out, 'pos_embed.weight', 'SiglipVisionModel', 'the position table', table)
    out['pos_embed.weight'] = of_rank(pos, table, '(h w) d', fix)[None]
    for kind in ('weight', 'bias'):  # the MAP head's in_proj rows [q | k | v] -> ProbeQKV's q and kv
        key = f'head.attention.in_proj_{kind}'
        if key in out:
            q, kv = out.pop(key).tensor_split([out['attn_pool.latent'].shape[-1]])
            out[f'attn_pool.attn.qkv.q.{kind}'], out[f'attn_pool.attn.qkv.kv.{kind}'] = q, kv
    return out
