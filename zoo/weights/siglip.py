"""transformers' SigLIP / SigLIP 2 image tower -> :mod:`zoo.backbones.siglip` (the :mod:`zoo.backbones.vit` family).

``SiglipVisionModel`` (``vision_model.*``) or ``SiglipModel`` (its ``text_model.*``, ``logit_scale`` and
``logit_bias`` are left out): ``embeddings.patch_embedding``, ``embeddings.position_embedding`` (the table
'(h w) d', no class token), ``encoder.layers.N`` with ``self_attn.{q,k,v}_proj`` (fused here) and ``out_proj``,
``layer_norm1/2``, ``mlp.fc1/fc2``, ``post_layernorm``, and the MAP head ``head.*`` (``probe``, a
``torch.nn.MultiheadAttention`` whose ``in_proj`` rows [q | k | v] become :class:`zoo.core.ProbeQKV`'s ``q`` and
``kv``, ``layernorm``, ``mlp``) -> :class:`zoo.core.ProbePool`. timm's SigLIP files are its ViT layout
(:func:`zoo.weights.timm.vit_from_timm`).

SigLIP 2's NaFlex tower (``Siglip2VisionModel``, ``Siglip2Model``) -> :mod:`zoo.backbones.naflex`
(:func:`siglip2_from_hf`): the same names, with a patch ``nn.Linear`` over (row, column, channel) patches, as ours,
and the table '(h w) d' of a square grid, ours '1 h w d' (both resampled per image, bilinear with antialias).
"""
from __future__ import annotations

from .clip import TOWER_RULES, vision_tower
from .io import CheckpointError
from .layout_error import CheckpointLayoutError, of_rank, required
from .rename import rules

_RULES = TOWER_RULES + rules(r"""
    ^head\.probe$                               -> attn_pool.latent
    ^head\.attention\.out_proj\.                -> attn_pool.attn.proj.
    ^head\.layernorm\.                          -> attn_pool.norm.
    ^head\.mlp\.                                -> attn_pool.mlp.
""")
_NOT_VISION = ('text_model.', 'logit_scale', 'logit_bias')


def is_siglip_layout(state: dict) -> bool:
    """transformers' SigLIP vision keys: a patch embedding under ``embeddings.`` and no class embedding (CLIP's)."""
    return any(k.endswith('embeddings.patch_embedding.weight') for k in state) and \
        not any(k.endswith('embeddings.class_embedding') for k in state)


def siglip_from_hf(state: dict) -> dict:
    """transformers' SigLIP vision layout (see the module docstring) -> this project's ViT keys."""
    if not is_siglip_layout({k: v for k, v in state.items() if not k.startswith(_NOT_VISION)}):
        raise CheckpointError("not transformers' SigLIP vision layout (no 'embeddings.patch_embedding.weight', or a "
                              "CLIP 'embeddings.class_embedding'); load with format='auto'")
    out, root = vision_tower(state, _RULES, 'SiglipVisionModel', _NOT_VISION)
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


def siglip2_from_hf(state: dict) -> dict:
    """transformers' SigLIP 2 NaFlex vision layout (see the module docstring) -> :mod:`zoo.backbones.naflex` keys."""
    out = siglip_from_hf(state)
    table = out['pos_embed.weight'][0]  # '(h w) d'
    side = round(table.shape[0] ** 0.5)
    if side * side != table.shape[0]:
        raise CheckpointLayoutError('vision_model.embeddings.position_embedding.weight', f"{table.shape[0]} positions "
                                    f"are no square grid", "Siglip2VisionModel saves num_patches = a square's; save "
                                    "the model again with save_pretrained")
    out['pos_embed.weight'] = table.reshape(1, side, side, -1)
    return out
