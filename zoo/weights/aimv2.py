"""transformers' AIMv2 image encoder (``Aimv2VisionModel``) -> :mod:`zoo.backbones.aimv2` (the :mod:`zoo.backbones.vit`
family).

``Aimv2VisionModel`` (or ``Aimv2Model``'s ``vision_model.*``; its ``text_model.*``, projections and ``logit_scale``
are left out): ``embeddings.patch_embed`` (the conv), ``embeddings.rms_norm`` (the patch tokens' norm),
``embeddings.position_embedding.weight`` (the table '(h w) d', no class token), ``encoder.layers.N`` with
``attention.{q,k,v}_proj`` (fused here) and ``out_proj``, ``rms_norm1/2``, the SwiGLU's ``ffn.gate_proj`` and
``ffn.up_proj`` (packed here as :class:`zoo.core.Mlp` ``gated`` [gate | value] in ``mlp.fc1``) and ``ffn.down_proj``,
and the final ``rms_norm``. The attention-pooling head of ``use_head=True`` (``head.*``: a CLS query over the tokens)
is not timm's model nor this project's and is left out: the pooled feature here is timm's, the mean of the normed
patch tokens. timm's AIMv2 files are its ViT layout (:func:`zoo.weights.timm.vit_from_timm`).
"""
from __future__ import annotations

import re

from .clip import TOWER_FRAME, vision_tower
from .io import CheckpointError
from .layout_error import of_rank, pack_swiglu, required
from .rename import rules

_RULES = TOWER_FRAME + rules(r"""
    ^embeddings\.patch_embed\.                  -> patch_embed.proj.
    ^embeddings\.rms_norm\.                     -> patch_embed.norm.
    \.attention\.out_proj\.                     -> .attn.proj.
    \.attention\.([qkv]_proj)\.                 -> .attn.\1.
    \.rms_norm(\d)\.                            -> .norm\1.
    \.ffn\.down_proj\.                          -> .mlp.fc2.
    \.ffn\.(gate|up)_proj\.                     -> .mlp.\1.
    ^rms_norm\.                                 -> norm.
""")
_NOT_VISION = ('text_model.', 'text_projection.', 'visual_projection.', 'logit_scale', 'head.', 'vision_model.head.')
_FIX = "transformers' Aimv2VisionModel saves it so; save the model again with save_pretrained"


def is_aimv2_layout(state: dict) -> bool:
    """transformers' AIMv2 vision keys: an RMSNorm on the patch embedding under ``embeddings.``."""
    return any(k.endswith('embeddings.rms_norm.weight') for k in state)


def aimv2_from_hf(state: dict) -> dict:
    """transformers' AIMv2 vision layout (see the module docstring) -> this project's ViT keys."""
    if not is_aimv2_layout(state):
        raise CheckpointError("not transformers' AIMv2 vision layout (no 'embeddings.rms_norm.weight'); load with "
                              "format='auto'")
    out, root = vision_tower(state, _RULES, 'Aimv2VisionModel', _NOT_VISION)
    out = pack_swiglu(out, 'gate', 'up', _FIX, lambda key: re.sub(  # as the file names it
        r'^blocks\.(\d+)\.mlp\.(gate|up)\.', lambda m: f'{root}encoder.layers.{m[1]}.ffn.{m[2]}_proj.', key))
    table = f'{root}embeddings.position_embedding.weight'
    pos = required(out, 'pos_embed.weight', 'Aimv2VisionModel', 'the position table', table)
    out['pos_embed.weight'] = of_rank(pos, table, '(h w) d', _FIX)[None]
    return out
