"""DINOv3 checkpoints (timm, official, transformers) -> :mod:`zoo.backbones.dinov3`.

- timm (its EVA model): ``cls_token``, ``reg_token``, ``blocks.N.gamma_1``/``gamma_2``, ``attn.qkv.weight`` with
  ``attn.q_bias``/``attn.v_bias`` in the ``_qkvb`` models, SwiGLU ``mlp.fc1_g`` (gate) / ``mlp.fc1_x`` (value) /
  ``mlp.fc2``; the EVA renames are :func:`zoo.weights.eva.eva_to_vit`'s, the two SwiGLU inputs are packed into one
  ``mlp.fc1`` [gate | value] (:class:`zoo.core.Mlp` ``gated``).
- official (facebookresearch/dinov3): ``cls_token``, ``storage_tokens`` (the registers), ``mask_token`` (dropped),
  ``rope_embed.periods`` (every block's ``attn.rope.stored_periods``: the official model runs on the stored periods,
  saved rounded to bfloat16, not on periods recomputed in float32 as timm and transformers do, a 1e-3 relative
  difference; :class:`zoo.core.rope.DINOv3Rope` takes them as it loads),
  ``blocks.N.attn.qkv.bias`` beside its ``bias_mask`` (the k third masked to zero) -> q and v biases,
  ``ls1.gamma``/``ls2.gamma``, ``mlp.fc1``/``fc2`` or SwiGLU ``mlp.w1`` (gate) / ``w2`` (value) / ``w3``, ``norm``;
  ``local_cls_norm`` (a norm of the pre-training's local crops, unused at inference) is dropped.
- transformers (``DINOv3ViTModel``, ``DINOv3ViTBackbone``): ``embeddings.{cls_token,register_tokens,mask_token,
  patch_embeddings}``, ``layer.N`` (``model.layer.N`` in the model's memory) with ``attention.{q,k,v}_proj`` (fused
  here; the q and v biases become the q/v-bias projection's), ``attention.o_proj``, ``layer_scale{1,2}.lambda1``,
  ``mlp.up_proj``/``down_proj`` or the gated ``gate_proj``/``up_proj``/``down_proj``, ``norm``.

A key bias is refused unless it is zero (masked): these models have none (:class:`zoo.core.qkv.QVBiasQKV`).
"""
from __future__ import annotations

import re

import torch

from .eva import eva_to_vit, is_eva_layout
from .layout_error import CheckpointLayoutError, fused_qkv, gather_qkv, pack_swiglu
from .rename import rename_keys, rules

_TOKENS = rules(r"""
    ^cls_token$          -> prefix.cls
    ^reg_token$          -> prefix.registers
    ^storage_tokens$     -> prefix.registers
""")
_PACKED_FIX = "every SwiGLU block saves both of its input projections; use the complete checkpoint"


def _no_key_bias(k_bias: torch.Tensor, key: str, fix: str) -> None:
    if k_bias.abs().max() > 0:
        raise CheckpointLayoutError(key, f"the key bias is not zero (max |bias| {k_bias.abs().max():.3g}); DINOv3 "
                                         f"models have none (timm's and the official code mask it)", fix)


def dinov3_from_timm(state: dict) -> dict:
    """timm's DINOv3 layout (its EVA model) -> this project's keys."""
    state = pack_swiglu(state, 'fc1_g', 'fc1_x', _PACKED_FIX)
    state = eva_to_vit(state) if is_eva_layout(state) else state
    return rename_keys(state, _TOKENS + rules(r"^pos_embed$ -> pos_embed.weight"))


_BLOCK = re.compile(r'^blocks\.(\d+)\.')
_OFFICIAL_DROP = re.compile(r'^(mask_token|local_cls_norm\..*)$|\.bias_mask$')


def dinov3_from_official(state: dict) -> dict:
    """The official layout (see the module docstring) -> this project's keys."""
    fix = ("the official DINOv3 models save qkv.bias '(3 d)' with its bias_mask; re-save the checkpoint from such "
           "a model")
    out = {}
    for key, value in state.items():
        if key.endswith('.attn.qkv.bias'):
            mask = state.get(key[:-len('bias')] + 'bias_mask')
            if value.ndim != 1 or value.shape[0] % 3 or (mask is not None and mask.shape != value.shape):
                raise CheckpointLayoutError(key, f"expected a q/k/v bias '(3 d)' (and a bias_mask of its shape), got "
                                                 f"{tuple(value.shape)}", fix)
            q, k, v = (value if mask is None else value * mask.to(value.dtype)).chunk(3)
            _no_key_bias(k, key, fix)
            out[key[:-len('bias')] + 'q_bias'], out[key[:-len('bias')] + 'v_bias'] = q, v
        elif key == 'rope_embed.periods':  # one table for every block's rotary positions
            blocks = {m[1] for m in map(_BLOCK.match, state) if m}
            out.update({f'blocks.{i}.attn.rope.stored_periods': value for i in blocks})
        elif not _OFFICIAL_DROP.search(key):
            out[key] = value
    out = pack_swiglu(rename_keys(out, [(r'\.mlp\.w3\.', '.mlp.fc2.')]), 'w1', 'w2', _PACKED_FIX)
    return rename_keys(out, _TOKENS)


_HF_RULES = rules(r"""
    ^embeddings\.cls_token$                   -> prefix.cls
    ^embeddings\.register_tokens$             -> prefix.registers
    ^embeddings\.patch_embeddings\.           -> patch_embed.proj.
    ^(model\.)?layer\.(\d+)\.                -> blocks.\2.
    \.attention\.o_proj\.                     -> .attn.proj.
    \.attention\.([qkv])_proj\.               -> .attn.\1_proj.
    \.layer_scale(\d)\.lambda1$               -> .ls\1.gamma
    \.mlp\.down_proj\.                        -> .mlp.fc2.
""")
_HF_QKV = re.compile(r'^(?P<layer>blocks\.\d+)\.attn\.(?P<part>[qkv]_proj)\.(?P<kind>weight)$')
_HF_BIAS = re.compile(r'^(blocks\.\d+)\.attn\.([qkv])_proj\.bias$')


def dinov3_from_hf(state: dict) -> dict:
    """transformers' layout (see the module docstring) -> this project's keys."""
    fix = "transformers' DINOv3ViTModel saves it so; save the model again with save_pretrained"
    state = {k: v for k, v in state.items() if k not in ('embeddings.mask_token', 'rope_embeddings.inv_freq')}
    root = 'model.layer.' if any(k.startswith('model.layer.') for k in state) else 'layer.'  # as the file names them
    state = rename_keys(state, _HF_RULES)
    out, parts = gather_qkv(state, _HF_QKV)
    for (block, kind), qkv in parts.items():
        out[f'{block}.attn.qkv.{kind}'] = fused_qkv(qkv, f"{root}{block.split('.')[1]}.attention", kind,
                                                    'DINOv3ViTModel', names=('q_proj', 'k_proj', 'v_proj'))
    for key in list(out):
        match = _HF_BIAS.match(key)
        if match and match[2] == 'k':
            _no_key_bias(out.pop(key), f"{root}{match[1].split('.')[1]}.attention.k_proj.bias", fix)
        elif match:
            out[f'{match[1]}.attn.qkv.{match[2]}_bias'] = out.pop(key)
    if any('.mlp.gate_proj.' in k for k in out):
        return pack_swiglu(out, 'gate_proj', 'up_proj', fix,
                           lambda key: re.sub(r'^blocks\.', root, key))
    return rename_keys(out, [(r'\.mlp\.up_proj\.', '.mlp.fc1.')])
