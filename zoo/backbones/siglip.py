"""SigLIP and SigLIP 2 image towers (Zhai et al. 2023; Tschannen et al. 2025) under timm's ``vit_*_siglip_*`` names:
the plain :mod:`.vit` family without a class token (learned positions on the patch tokens only), pre-LN blocks,
LayerNorm eps 1e-6 and a final norm, so nothing here but the registered variants. SigLIP 2's weights are tags of the
same names (``vit_base_patch16_siglip_224.v2_webli``): the same towers.

The pooled feature is SigLIP's MAP head (``global_pool='map'``: a learned probe asks the normed tokens through the
core's Attention, then a residual MLP; :class:`zoo.core.ProbePool`) or, for the ``_gap_`` names, the mean of the
normed tokens (``fc_norm=False``). timm's default weights of every name are the tower alone (``num_classes=0``).
Where Big Vision trained a tower with the tanh GELU, its MLPs (and the MAP head's) use it (``act='gelu_tanh'``).
:mod:`zoo.weights` reads timm's files (:func:`zoo.weights.timm.vit_from_timm`, the MAP head's keys renamed) and
transformers' ``SiglipVisionModel`` / ``SiglipModel`` (:mod:`zoo.weights.siglip`).
"""
from __future__ import annotations

from ..registry import HALF_MEAN, HALF_STD, register_variant
from .vit import VIT, VIT_SIZES
from .vit_spec import EncoderSpec, PositionSpec, PrefixSpec

SIGLIP_SPEC = EncoderSpec(prefix=PrefixSpec(cls=False), positions=PositionSpec(prefix=False))  #: no class token
SIGLIP_SIZES = {
    'base': VIT_SIZES['base'],
    'large': VIT_SIZES['large'],
    'so400m': dict(embed_dim=1152, depth=27, num_heads=16, mlp_ratio=3.7362),
    'giantopt': dict(embed_dim=1536, depth=40, num_heads=16),
}
# size, patch -> input sizes of the MAP names, of the _gap_ names, and whether the MLPs use the tanh GELU
_SIGLIP_VITS = {
    ('base', 32): ((256,), (256,), True),
    ('base', 16): ((224, 256, 384, 512), (224, 256, 384, 512), False),
    ('large', 16): ((256, 384, 512), (256, 384, 512), False),
    ('so400m', 14): ((224, 378, 384), (224, 378, 384, 448, 896), False),  # 384 px: see below
    ('so400m', 16): ((256, 384, 512), (256, 384, 512), True),
    ('giantopt', 16): ((256, 384), (256, 384), True),
}
# vit_so400m_patch14_siglip_384 and its _gap_ twin: 384 px is not tiled by 14 px patches; timm's strided conv drops the
# last 6 rows and columns (27 x 27 patches), as ``drop_remainder`` does here for those two names only (timm calls its
# 378 px names the corrected variant of these).
_DROP_REMAINDER = ('so400m', 14, 384)
_TANH_512 = ('large', 16)  # timm's large 512 px towers (SigLIP 2) use the tanh GELU, its 256 / 384 ones the exact GELU
for (_size, _patch), (_map_sizes, _gap_sizes, _tanh) in _SIGLIP_VITS.items():
    for _pool, _sizes in (('', _map_sizes), ('_gap', _gap_sizes)):
        for _res in _sizes:
            _act = 'gelu_tanh' if _tanh or ((_size, _patch) == _TANH_512 and _res == 512) else 'gelu'
            _remainder = 'drop' if (_size, _patch, _res) == _DROP_REMAINDER else 'refuse'
            register_variant(f'vit_{_size}_patch{_patch}_siglip{_pool}_{_res}', VIT, mean=HALF_MEAN, std=HALF_STD,
                             input_size=_res, num_classes=0, patch_size=_patch,
                             head=dict(global_pool='avg', fc_norm=False) if _pool else dict(global_pool='map'),
                             spec=SIGLIP_SPEC.replace(block=dict(mlp=dict(act=_act)), patch=dict(remainder=_remainder)),
                             **SIGLIP_SIZES[_size])
