"""DINOv3 (Simeoni et al. 2025, facebookresearch/dinov3) ViTs under timm's names: the :mod:`.vit` family with 16x16
patches, a CLS token and 4 register tokens, no absolute positions but DINOv3's axial RoPE in every attention
(:class:`zoo.core.rope.DINOv3Rope`: patch centres in [-1, 1], periods ``100 ** (4i / d)``, row first, "rotate half"
channel pairs, the CLS and register tokens not turned), LayerScale (init 1e-5), LayerNorm eps 1e-5 and, in the
``_plus`` and 7B sizes, SwiGLU MLPs; built at 256x256, headless (``num_classes=0``) and pooled as timm's default:
the mean of the normed patch tokens (``global_pool='token'`` gives the official CLS feature).

- ``vit_{small,small_plus,base,large,huge_plus}_patch16_dinov3``: no q/k/v biases (timm's conversion of the
  released weights, whose biases are zero);
- the same with ``_qkvb`` (and ``vit_tiny_patch16_dinov3_qkvb``): learned q and v biases, none on k
  (:class:`zoo.core.qkv.QVBiasQKV`; the official code keeps a k bias but masks it to zero);
- ``vit_7b_patch16_dinov3``: 4096 wide, 40 blocks, SwiGLU 8192 (build it on the meta device to inspect it).

RoPE train-time augmentation: the official recipe rescales the coordinates by exp U(-log 2, log 2) in training
mode (``rescale=2``, also transformers' default); so do these models (``rope=dict(kind='dinov3', ...)`` overrides it),
each block drawing its own factor as the official ``forward_features_list`` does (transformers draws one per forward);
evaluation uses the plain grid, where timm's, transformers' and the official outputs agree.

Weights: timm's (its EVA layout), transformers' ``DINOv3ViTModel`` and the official checkpoints, converted by
:mod:`zoo.weights.dinov3`. The official and transformers' files carry the (zero) q and v biases: they load into the
``_qkvb`` names.
"""
from __future__ import annotations

from ..registry import IMAGENET_MEAN, IMAGENET_STD, register_variant
from .dinov2 import DINOv2Backbone
from .vit import ViTClassifier
from .vit_spec import AttentionSpec, BlockSpec, EncoderSpec, PositionSpec, PrefixSpec


class DINOv3Classifier(ViTClassifier):
    """A DINOv3 ViT with final norm and pooling (timm's model; the pretrained weights come without a head)."""
    family = 'dinov3'


class DINOv3Backbone(DINOv2Backbone):
    """DINOv3 as a dense backbone; ``tap_norm=True`` passes each tap through the final norm (transformers'
    ``DINOv3ViTBackbone`` with ``apply_layernorm``, the official ``get_intermediate_layers(norm=True)``)."""
    family = 'dinov3'


DINOV3 = {'backbone': DINOv3Backbone, 'classifier': DINOv3Classifier}
DINOV3_ROPE = dict(kind='dinov3', base=100.0, normalize='separate', rescale=2.0)
# size -> width, depth, heads, and the SwiGLU hidden width ratio where the size has SwiGLU MLPs
DINOV3_SIZES = {
    'tiny': dict(embed_dim=192, depth=12, num_heads=3),
    'small': dict(embed_dim=384, depth=12, num_heads=6),
    'small_plus': dict(embed_dim=384, depth=12, num_heads=6),          # SwiGLU 1536
    'base': dict(embed_dim=768, depth=12, num_heads=12),
    'large': dict(embed_dim=1024, depth=24, num_heads=16),
    'huge_plus': dict(embed_dim=1280, depth=32, num_heads=20),         # SwiGLU 5120
    '7b': dict(embed_dim=4096, depth=40, num_heads=32, mlp_ratio=2.0),  # SwiGLU 8192
}
_SWIGLU = ('small_plus', 'huge_plus', '7b')
#: a class token and 4 registers, no absolute positions, RoPE in every attention, no q/k/v biases, LayerScale 1e-5
DINOV3_SPEC = EncoderSpec(prefix=PrefixSpec(registers=4), positions=PositionSpec(kind='none'), norm_eps=1e-5,
                          block=BlockSpec(attn=AttentionSpec(qkv='fused_no_bias', rope=DINOV3_ROPE), layer_scale=1e-5))
_PRETRAINED = dict(mean=IMAGENET_MEAN, std=IMAGENET_STD, input_size=256, num_classes=0, patch_size=16,
                   head=dict(global_pool='avg', fc_norm=False))


def dinov3_spec(size: str, qkvb: bool) -> EncoderSpec:
    """The size's spec: SwiGLU MLPs in the ``_plus`` and 7B sizes; learned q and v biases with ``qkvb``."""
    return DINOV3_SPEC.replace(block=dict(attn=dict(qkv='qv_bias' if qkvb else 'fused_no_bias'),
                                          mlp=dict(kind='swiglu' if size in _SWIGLU else 'mlp')))


# timm's names: (size, with q/v biases)
_NAMES = [(size, qkvb) for size in ('small', 'small_plus', 'base', 'large', 'huge_plus') for qkvb in (False, True)] + \
         [('tiny', True), ('7b', False)]
for _size, _qkvb in _NAMES:
    register_variant(f"vit_{_size}_patch16_dinov3{'_qkvb' if _qkvb else ''}", DINOV3, **_PRETRAINED,
                     spec=dinov3_spec(_size, _qkvb), **DINOV3_SIZES[_size])

__all__ = ['DINOv3Backbone', 'DINOv3Classifier']
