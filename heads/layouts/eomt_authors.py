"""The EoMT authors' own checkpoints (tue-mps/eomt: the state dict of their LightningModule, ``network.*`` keys, as
their published ``pytorch_model.bin`` files hold it) -> this project's :class:`heads.models.eomt.EoMT` keys: the
``'EoMT authors'`` row of :data:`heads.layouts.table.LAYOUTS`.

Their ``network`` is ``models.eomt.EoMT``: ``encoder.backbone`` a timm ViT (DINOv2: ``cls_token``, ``reg_token``,
``pos_embed``, ``blocks.N.attn.qkv``, ...; :func:`zoo.weights.timm.vit_from_timm`) or transformers'
DINOv3ViTModel renamed in place (``patch_embed`` its ``embeddings``, ``blocks`` its ``layer``;
:func:`zoo.weights.dinov3.dinov3_from_hf`),
``q`` the queries, ``mask_head`` a Sequential of three Linears (0, 2, 4), ``class_head``, ``upscale`` (ScaleBlocks:
``conv1``, ``conv2``, ``norm``, as ours), ``attn_mask_probs``. ``encoder.pixel_mean`` / ``pixel_std`` are checked to
be ImageNet's (fixed in their ``models/vit.py``; ours normalise in the model's data preprocessor) and not loaded; the
loss's ``criterion.*`` is dropped.

Their DINOv3 releases store *deltas*: each weight minus the model built from DINOv3's pretrained weights with
everything outside the encoder zeroed (their ``delta_weights``; buffers as built: ``attn_mask_probs`` ones).
:func:`eomt_from_deltas` adds them to DINOv3's file as their LightningModule does (``tools/convert_weights.py
eomt-deltas``); loading a delta file as weights is refused (an annealed model's saved probabilities are 0, so its
deltas are -1: below 0, which no probability is).
"""
from __future__ import annotations

import re

import torch

from zoo.registry import IMAGENET_MEAN, IMAGENET_STD
from zoo.weights import CheckpointLayoutError
from zoo.weights.dinov3 import dinov3_from_hf
from zoo.weights.rename import rename_keys, rules
from zoo.weights.timm import vit_from_timm

ENCODER = 'network.encoder.backbone.'
_HEAD = rules(r"""
    ^network\.q\.weight$           -> query.weight
    ^network\.mask_head\.0\.       -> mask_mlp.fc1.
    ^network\.mask_head\.2\.       -> mask_mlp.fc2.
    ^network\.mask_head\.4\.       -> mask_mlp.fc3.
    ^network\.class_head\.         -> class_head.
    ^network\.upscale\.            -> upscale.
    ^network\.attn_mask_probs$     -> attn_mask_probs
""")
# transformers' DINOv3ViTModel as the authors' models/vit.py renames it -> the names transformers saves
_DINOV3 = rules(r"""
    ^patch_embed\.  -> embeddings.
    ^blocks\.       -> layer.
""")
_PIXELS = {'network.encoder.pixel_mean': IMAGENET_MEAN, 'network.encoder.pixel_std': IMAGENET_STD}
DELTAS_FIX = ("The authors' DINOv3 releases store deltas to DINOv3's pretrained weights: add them first with "
              "`python tools/convert_weights.py eomt-deltas DELTAS DINOV3 OUT` (DINOV3: the DINOv3 model's "
              "model.safetensors from its transformers folder), then load OUT")


def is_authors_eomt(state: dict) -> bool:
    """Keys of the authors' LightningModule holding an EoMT: the queries and an encoder under ``network.``."""
    return 'network.q.weight' in state and any(k.startswith(ENCODER) for k in state)


def _is_dinov3(encoder: dict) -> bool:
    return 'patch_embed.patch_embeddings.weight' in encoder


def convert_authors_eomt_state(state: dict, model=None) -> dict:
    """The authors' EoMT keys to ours (module docstring); a delta file or other preprocessing is refused."""
    probs = state.get('network.attn_mask_probs')
    if probs is not None and bool((probs < 0).any()):
        raise CheckpointLayoutError('network.attn_mask_probs', f"holds {probs.tolist()}, below 0: this file stores "
                                    f"deltas, not weights", DELTAS_FIX)
    for key, expected in _PIXELS.items():
        if key in state and not torch.allclose(state[key].flatten().double(),
                                               torch.tensor(expected, dtype=torch.float64), atol=1e-6):
            raise CheckpointLayoutError(key, f"is {state[key].flatten().tolist()}, not ImageNet's (the authors' "
                                        f"models/vit.py fixes it), so the file is not the authors' EoMT",
                                        "Load a checkpoint their code wrote")
    encoder = {k[len(ENCODER):]: v for k, v in state.items() if k.startswith(ENCODER)}
    encoder = dinov3_from_hf(rename_keys(encoder, _DINOV3)) if _is_dinov3(encoder) else vit_from_timm(encoder)
    rest = {k: v for k, v in state.items() if not k.startswith(ENCODER) and k not in _PIXELS
            and not k.startswith('criterion.')}
    return {**{f'backbone.{k}': v for k, v in encoder.items()}, **rename_keys(rest, _HEAD)}


def eomt_from_deltas(deltas: dict, dinov3: dict, name: str = 'deltas') -> dict:
    """The authors' full EoMT weights from a delta file and DINOv3's pretrained weights (a transformers
    DINOv3ViTModel state dict, ``layer.N`` or ``model.layer.N`` keys), as their LightningModule's delta mode adds
    them: encoder weights plus DINOv3's, ``pixel_mean`` / ``pixel_std`` plus ImageNet's, ``attn_mask_probs`` plus
    1, everything else plus 0. A key or shape DINOv3's file lacks is a :class:`CheckpointLayoutError` naming it."""
    if not is_authors_eomt(deltas):
        raise CheckpointLayoutError('network.q.weight', f"{name} is not an EoMT authors' checkpoint (no "
                                    f"network.q.weight and network.encoder.backbone.* keys)",
                                    "Give the delta file of an EoMT-DINOv3 release")
    dinov3 = {re.sub(r'^model\.layer\.', 'layer.', k): v for k, v in dinov3.items()}
    # each authors' encoder key -> the name transformers' DINOv3 file gives the same weight
    dinov3_names = {key: name for name, key in rename_keys(
        {k[len(ENCODER):]: k for k in deltas if k.startswith(ENCODER)}, _DINOV3).items()}
    full = {}
    for key, delta in deltas.items():
        if key.startswith(ENCODER):
            base_key = dinov3_names[key]
            base = dinov3.get(base_key)
            if base is None or base.shape != delta.shape:
                problem = 'missing' if base is None else f"of shape {tuple(base.shape)}, not {tuple(delta.shape)}"
                raise CheckpointLayoutError(base_key, f"{problem} in DINOv3's weights, which {key} of {name} is a "
                                            f"delta to", "Give the DINOv3 model the release names (its config's "
                                            "backbone_name, e.g. facebook/dinov3-vitl16-pretrain-lvd1689m)")
            full[key] = base.to(delta.dtype) + delta
        elif key in _PIXELS:
            full[key] = delta + torch.tensor(_PIXELS[key], dtype=delta.dtype).reshape(delta.shape)
        elif key == 'network.attn_mask_probs':
            full[key] = delta + 1
        else:
            full[key] = delta.clone()
    return full
