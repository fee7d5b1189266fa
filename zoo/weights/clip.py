"""transformers' CLIP image tower -> :mod:`zoo.backbones.clip` (the :mod:`zoo.backbones.vit` family).

``CLIPVisionModel`` and ``CLIPVisionModelWithProjection`` (``vision_model.*``, the latter with ``visual_projection``),
or ``CLIPModel`` (its ``text_model.*``, ``text_projection`` and ``logit_scale`` are left out): ``embeddings.*`` (the
class embedding 'd', the position table '(1 + h w) d'), ``pre_layrnorm`` (sic), ``encoder.layers.N`` with
``self_attn.{q,k,v}_proj`` (fused here) and ``out_proj``, ``layer_norm1/2``, ``mlp.fc1/fc2``, ``post_layernorm``.
The projection (no bias) becomes the classifier's head with a zero bias. timm's CLIP files are its ViT layout
(:func:`zoo.weights.timm.vit_from_timm`).
"""
from __future__ import annotations

import re

import torch

from .io import CheckpointError
from .layout_error import fused_qkv, gather_qkv, of_rank, required
from .rename import rename_keys, rules

#: What transformers' CLIP-style vision towers (CLIP, SigLIP, AIMv2) name alike: the model's prefix (dropped), the
#: position table and the layers. Applied first, so that the rules after it read the keys without the prefix.
TOWER_FRAME = rules(r"""
    ^vision_model\.                             ->
    ^embeddings\.position_embedding\.weight$    -> pos_embed.weight
    ^encoder\.layers\.(\d+)\.                   -> blocks.\1.
""")
#: The encoder of transformers' CLIP and SigLIP vision towers: names -> this project's ViT keys.
TOWER_RULES = TOWER_FRAME + rules(r"""
    ^embeddings\.patch_embedding\.              -> patch_embed.proj.
    \.self_attn\.out_proj\.                     -> .attn.proj.
    \.self_attn\.([qkv]_proj)\.                 -> .attn.\1.
    \.layer_norm(\d)\.                          -> .norm\1.
    ^post_layernorm\.                           -> norm.
""")
_RULES = TOWER_RULES + rules(r"""
    ^embeddings\.class_embedding$               -> prefix.cls
    ^pre_layrnorm\.                             -> norm_pre.
    ^visual_projection\.weight$                 -> head.weight
""")
_QKV = re.compile(r'^(?P<layer>blocks\.\d+)\.attn\.(?P<part>[qkv]_proj)\.(?P<kind>weight|bias)$')
_NOT_VISION = ('text_model.', 'text_projection.', 'logit_scale')


def vision_tower(state: dict, rules_: list, model: str, not_vision: tuple) -> tuple[dict, str]:
    """A transformers CLIP-style vision tower's keys (those not starting with ``not_vision``) renamed by ``rules_``,
    each layer's q/k/v_proj fused; and the prefix the file puts before its keys ('vision_model.' or ''), for
    messages."""
    state = {k: v for k, v in state.items() if not k.startswith(not_vision) and not k.endswith('.position_ids')}
    root = 'vision_model.' if any(k.startswith('vision_model.') for k in state) else ''  # as the file names keys
    out, parts = gather_qkv(rename_keys(state, rules_), _QKV)
    for (block, kind), qkv in parts.items():
        out[f'{block}.attn.qkv.{kind}'] = fused_qkv(qkv, f"{root}encoder.layers.{block.split('.')[1]}.self_attn",
                                                    kind, model, names=('q_proj', 'k_proj', 'v_proj'))
    return out, root


def clip_from_hf(state: dict) -> dict:
    """transformers' CLIP vision layout (see the module docstring) -> this project's ViT keys."""
    if not any(k.endswith('embeddings.class_embedding') for k in state):
        raise CheckpointError("not transformers' CLIP vision layout (no 'embeddings.class_embedding') nor its SigLIP "
                              "one (a patch embedding and no class embedding), the hf layouts of the 'vit' family; "
                              "load with format='auto' (the layout is told from the keys) or the layout the file is in")
    out, root = vision_tower(state, _RULES, 'CLIPVisionModel', _NOT_VISION)
    fix = "transformers' CLIPVisionModel saves it so; save the model again with save_pretrained"
    out['prefix.cls'] = of_rank(out['prefix.cls'], f'{root}embeddings.class_embedding', 'd', fix).reshape(1, 1, -1)
    table = f'{root}embeddings.position_embedding.weight'
    pos = required(out, 'pos_embed.weight', 'CLIPVisionModel', 'the position table', table)
    out['pos_embed.weight'] = of_rank(pos, table, '(1 + h w) d', fix)[None]
    if 'head.weight' in out:  # CLIP's projection has no bias
        out['head.bias'] = torch.zeros(out['head.weight'].shape[0], dtype=out['head.weight'].dtype)
    return out
