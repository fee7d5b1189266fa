"""DINOv2 (Oquab et al. 2023) and DINOv2 with registers (Darcet et al. 2024): ViTs with 14x14 patches, LayerScale,
optionally 4 register tokens, SwiGLU MLPs at the giant size; built at 518x518 (a 37x37 grid). The classifiers have
no head by default (``num_classes=0``, as timm's: the pretrained weights come without one).

Names as timm's (``vit_{small,base,large,giant}_patch14_dinov2`` and ``..._reg4_dinov2``). Weights in timm's, the
official (facebookresearch/dinov2: ``register_tokens``, ``mask_token``, ``mlp.w12``/``w3``, chunked blocks) and
transformers' (``Dinov2Model``, ``Dinov2WithRegistersModel``) layouts, converted by :mod:`zoo.weights.dinov2`.

Register models: the official code adds the position table to CLS and patches and then inserts the registers
(without positions); as in timm, the table's CLS row is folded into the CLS token when such a checkpoint loads, and the
table covers the patch grid only (``pos_embed_prefix=False``): the same sums.

Position table at other grids (``pos_interp``): 'bicubic' with ``pos_antialias=True``, timm's ``dynamic_img_size``
path and the default here; 'bicubic' with ``pos_antialias=False``, transformers' ``Dinov2Model`` and Depth Anything;
'dinov2', the official code (bicubic at scale factors (new + 0.1) / old, no antialias), Depth Anything V2's own.
"""
from __future__ import annotations

import torch
from torch import nn

from ..registry import IMAGENET_MEAN, IMAGENET_STD, register_variant
from .vit import ViTBackbone, ViTClassifier, ViTEncoder
from .vit_spec import BlockSpec, EncoderSpec, MlpSpec


class DINOv2Classifier(ViTClassifier):
    """A DINOv2 ViT with final norm and head (timm's model; the pretrained weights come without a head)."""
    family = 'dinov2'


class DINOv2Backbone(ViTBackbone):
    """DINOv2 as a dense backbone. ``tap_norm``: each tap goes through the final norm ``norm`` (shared, as the
    official ``get_intermediate_layers(norm=True)`` and transformers' ``Dinov2Backbone`` with ``apply_layernorm``
    give them to Depth Anything); without it the taps are the blocks' raw outputs (timm's
    ``forward_intermediates``)."""
    family = 'dinov2'

    def __init__(self, tap_norm: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.tap_norm = tap_norm
        if tap_norm:
            self.norm = nn.LayerNorm(self.embed_dim, eps=self.blocks[0].norm1.eps)
            self.classifier_only = tuple(k for k in ViTEncoder.classifier_only if k != 'norm.')

    def run_blocks(self, x: torch.Tensor, grid, taps=(), stop: int | None = None):
        x, tapped = super().run_blocks(x, grid, taps, stop)
        return x, [self.norm(t) for t in tapped] if self.tap_norm else tapped


DINOV2 = {'backbone': DINOv2Backbone, 'classifier': DINOv2Classifier}
DINOV2_SIZES = {
    'small': dict(embed_dim=384, depth=12, num_heads=6),
    'base': dict(embed_dim=768, depth=12, num_heads=12),
    'large': dict(embed_dim=1024, depth=24, num_heads=16),
    # SwiGLU hidden width (int(4 * 1536 * 2 / 3) + 7) // 8 * 8 = 4096 = int(1536 * 2.66667)
    'giant': dict(embed_dim=1536, depth=40, num_heads=24, mlp_ratio=2.66667),
}
DINOV2_SPEC = EncoderSpec(block=BlockSpec(layer_scale=1e-5))  #: the plain ViT's, with LayerScale 1e-5
DINOV2_GIANT_SPEC = DINOV2_SPEC.replace(block=dict(mlp=MlpSpec(kind='swiglu')))  #: SwiGLU MLPs
_REGISTERS = dict(prefix=dict(registers=4), positions=dict(prefix=False))  # the position table on the patches only
for _size, _args in DINOV2_SIZES.items():
    _spec = DINOV2_GIANT_SPEC if _size == 'giant' else DINOV2_SPEC
    for _reg in ('', '_reg4'):
        register_variant(f'vit_{_size}_patch14{_reg}_dinov2', DINOV2, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                         input_size=518, num_classes=0, patch_size=14,
                         spec=_spec.replace(**_REGISTERS) if _reg else _spec, **_args)

__all__ = ['DINOv2Backbone', 'DINOv2Classifier']
