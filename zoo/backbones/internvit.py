"""InternViT-300M (OpenGVLab, InternVL 2.5: the vision tower distilled from InternViT-6B) under timm's name
``vit_intern300m_patch14_448``: the plain :mod:`.vit` family at large width (1024, 24 blocks, 16 heads), 14 px patches,
a class token with a learned position (the table covers it), LayerScale initialised at 0.1 and no final norm, so
nothing here but the registered variant. The pooled feature is the class token of the last block as it comes out
(timm's ``final_norm=False``, token pooling); timm's default weights are the tower alone (``num_classes=0``).
:func:`zoo.weights.timm.vit_from_timm` reads timm's files (plain ViT keys, LayerScale ``ls1.gamma`` / ``ls2.gamma``).
"""
from __future__ import annotations

from ..registry import IMAGENET_MEAN, IMAGENET_STD, register_variant
from .vit import VIT, VIT_SIZES
from .vit_spec import BlockSpec, EncoderSpec

INTERNVIT_SPEC = EncoderSpec(block=BlockSpec(layer_scale=0.1))  #: the plain ViT's, with LayerScale 0.1
register_variant('vit_intern300m_patch14_448', VIT, mean=IMAGENET_MEAN, std=IMAGENET_STD, input_size=448,
                 num_classes=0, head=dict(final_norm=False), patch_size=14, spec=INTERNVIT_SPEC,
                 **VIT_SIZES['large'])
