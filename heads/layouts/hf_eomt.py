"""transformers' ``EomtForUniversalSegmentation`` and ``EomtDinov3ForUniversalSegmentation`` state dicts -> this
project's :class:`heads.models.eomt.EoMT` keys (the ``'transformers eomt'`` and ``'transformers eomt_dinov3'`` rows of
:data:`heads.layouts.table.LAYOUTS`).

EoMT (DINOv2-like): q/k/v Linears fused into one, the SwiGLU ``gate_proj``/``up_proj`` packed into one fc1
([gate | value], :class:`zoo.core.Mlp` ``gated``), the head's parts renamed; ``attn_mask_probs`` loaded as saved, the
loss's ``criterion.empty_weight`` dropped. EoMT-DINOv3: the DINOv3 ViT (``embeddings.*``, ``layers.N.*``) through
:func:`zoo.weights.dinov3.dinov3_from_hf`, the head as EoMT's.
"""
from __future__ import annotations

import re

from zoo.weights.dinov3 import dinov3_from_hf
from zoo.weights.layout_error import fused_qkv, gather_qkv, pack_swiglu
from zoo.weights.rename import rename_keys, rules

_RULES = rules(r"""
    ^embeddings\.cls_token$                                  -> backbone.prefix.cls
    ^embeddings\.register_tokens$                            -> backbone.prefix.registers
    ^embeddings\.position_embeddings\.weight$                -> backbone.pos_embed.weight
    ^embeddings\.patch_embeddings\.projection\.              -> backbone.patch_embed.proj.
    ^layers\.(\d+)\.norm(\d)\.                               -> backbone.blocks.\1.norm\2.
    ^layers\.(\d+)\.attention\.out_proj\.                    -> backbone.blocks.\1.attn.proj.
    ^layers\.(\d+)\.layer_scale(\d)\.lambda1$                -> backbone.blocks.\1.ls\2.gamma
    ^layers\.(\d+)\.mlp\.(fc\d)\.                            -> backbone.blocks.\1.mlp.\2.
    ^layers\.(\d+)\.mlp\.down_proj\.                         -> backbone.blocks.\1.mlp.fc2.
    ^layernorm\.                                             -> norm.
    ^upscale_block\.block\.(\d+)\.layernorm2d\.              -> upscale.\1.norm.
    ^upscale_block\.block\.(\d+)\.                           -> upscale.\1.
    ^mask_head\.                                             -> mask_mlp.
    ^class_predictor\.                                       -> class_head.
""")
_QKV = re.compile(r'^layers\.(?P<layer>\d+)\.attention\.(?P<part>[qkv]_proj)\.(?P<kind>weight|bias)$')
_UNUSED = re.compile(r'^criterion\.')


def convert_hf_eomt_state(state: dict, model=None) -> dict:
    """transformers' EoMT keys to ours (module docstring)."""
    rest, qkv = gather_qkv({k: v for k, v in state.items() if not _UNUSED.match(k)}, _QKV)
    rest = pack_swiglu(rest, 'gate_proj', 'up_proj', "transformers' EoMT saves both; save the model again with "
                       "save_pretrained")  # layers.N.mlp.fc1 = [gate | value]
    out = rename_keys(rest, _RULES)
    registers = out.get('backbone.prefix.registers')
    if registers is not None and registers.shape[1] == 0:  # transformers keeps an empty parameter for none
        del out['backbone.prefix.registers']
    table = out.get('backbone.pos_embed.weight')
    if table is not None and table.ndim == 2:  # an nn.Embedding '(h w) d' -> '1 (h w) d'
        out['backbone.pos_embed.weight'] = table[None]
    for (block, kind), parts in qkv.items():
        out[f'backbone.blocks.{block}.attn.qkv.{kind}'] = fused_qkv(
            parts, f'layers.{block}.attention', kind, 'EoMT model', ('q_proj', 'k_proj', 'v_proj'))
    return out


def convert_hf_eomt_dinov3_state(state: dict, model=None) -> dict:
    """transformers' EoMT-DINOv3 keys to ours: the DINOv3 ViT (``embeddings.*``, ``layers.N.*``) by
    :func:`zoo.weights.dinov3.dinov3_from_hf`, the head as :func:`convert_hf_eomt_state`."""
    backbone = {('layer.' + k[len('layers.'):] if k.startswith('layers.') else k): v for k, v in state.items()
                if k.startswith(('embeddings.', 'layers.', 'rope_embeddings.'))}
    head = convert_hf_eomt_state({k: v for k, v in state.items()
                                  if not k.startswith(('embeddings.', 'layers.', 'rope_embeddings.'))})
    return {**{f'backbone.{k}': v for k, v in dinov3_from_hf(backbone).items()}, **head}
