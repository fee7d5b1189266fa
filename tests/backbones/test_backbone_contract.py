"""Every registered backbone meets the contract (zoo.contract): map i has out_channels[i] channels and is exactly
input / out_strides[i] at two non-square sizes that are multiples of input_multiple; token backbones give
len(prefix_names) prefix tokens per tap with the tap's width, the others none; no_weight_decay names real
parameters, and every position table, prefix token and relative-position table is among them."""
import math
import re

import pytest
import torch

import zoo
from zoo.contract import Backbone
from zoo.registry import get_variant

# Expensive names whose code paths a cheaper registered name of the same family covers: not built here.
COVERED_BY = {
    **{name: 'swin_tiny_patch4_window7_224' for name in zoo.list_backbones('swin_*')
       if name != 'swin_tiny_patch4_window7_224'},
    **{name: 'swinv2_tiny_window16_256' for name in zoo.list_backbones('swinv2_*')
       if name not in ('swinv2_tiny_window8_256', 'swinv2_tiny_window16_256')},
    **{f'vit_base_patch16_{s}_224': f'vit_small_patch16_{s}_224' for s in ('rope', 'rope_mixed', 'rope_ape',
                                                                          'rope_mixed_ape')},
    **dict.fromkeys(('vit_base_patch16_rope_reg1_gap_256', 'vit_mediumd_patch16_rope_reg1_gap_256',
                     'vit_betwixt_patch16_rope_reg4_gap_256'), 'vit_medium_patch16_rope_reg1_gap_256'),
    **{f'vit_{size}_patch14{reg}_dinov2': f'vit_small_patch14{reg}_dinov2'
       for size in ('base', 'large', 'giant') for reg in ('', '_reg4')},
    'vit_base_r50_s16_384': 'vit_base_r50_s16_224',
    **{name: 'vit_xsmall_patch16_clip_224' for name in zoo.list_backbones('vit_*_clip_*')
       if name != 'vit_xsmall_patch16_clip_224'},  # CLIP: the ViT classes; QuickGELU in test_clip.py
    **{name: 'vit_base_patch16_siglip_224' for name in zoo.list_backbones('vit_*_siglip_*')
       if name != 'vit_base_patch16_siglip_224'},  # SigLIP: the ViT classes; the heads in test_siglip.py
    **{name: 'vit_small_patch16_dinov3' for name in zoo.list_backbones('vit_*_dinov3*')
       if name != 'vit_small_patch16_dinov3'},  # DINOv3: one class pair; biases, SwiGLU, 7B in test_dinov3.py
    **{name: 'eva02_tiny_patch14_224' for name in zoo.list_backbones('eva02_*')
       if name != 'eva02_tiny_patch14_224'},  # EVA-02: the ViT classes; each code path in test_eva02.py
    **{name: 'vit_pe_core_tiny_patch16_384' for name in zoo.list_backbones('vit_pe_*')
       if name != 'vit_pe_core_tiny_patch16_384'},  # Perception Encoder: the ViT classes; each path in test_pe.py
    **{name: 'aimv2_large_patch14_224' for name in zoo.list_backbones('aimv2_*')
       if name != 'aimv2_large_patch14_224'},  # AIMv2: the ViT classes (large: slow lane); reduced in test_aimv2.py
    **{name: 'vit_base_patch16_radio_v3' for name in zoo.list_backbones('vit_*_radio_*')
       if name != 'vit_base_patch16_radio_v3'},  # C-RADIO: the ViT classes, the cropped table; test_radio.py
    'vit_intern300m_patch14_448': 'vit_large_patch16_224',  # InternViT-300M: the ViT classes; test_internvit.py
    **{name: 'naflexvit_base_patch16_gap' for name in zoo.list_backbones('naflexvit_*')
       if name != 'naflexvit_base_patch16_gap'},  # NaFlex: one class pair; every name reduced in test_naflex.py
}
NAMES = [name for name in zoo.list_backbones() if name not in COVERED_BY]
#: The big variants (2-9 s each) run in the full suite only, unless their class has no smaller one: the fast lane
#: (-m 'not slow') builds every backbone class (tests/project/test_fast_lane.py).
BIG = re.compile(r'_(base|large|huge|giant)_|coatnet_[2-9]|cvt_w24')
SMALL_CLASSES = {get_variant(name).classes['backbone'] for name in NAMES if not BIG.search(name)}
SLOW = {name for name in NAMES if BIG.search(name) and get_variant(name).classes['backbone'] in SMALL_CLASSES}


def test_expensive_names_are_covered_by_a_built_name_of_the_same_classes():
    assert set(COVERED_BY) <= set(zoo.list_backbones())
    for name, cheaper in COVERED_BY.items():
        assert cheaper in NAMES and get_variant(name).classes == get_variant(cheaper).classes, name


def sizes_for(backbone: Backbone) -> list[tuple[int, int]]:
    """Two non-square sizes, multiples of the input multiple, above the smallest input."""
    m = backbone.input_multiple
    base = max(m, math.ceil(64 / m) * m)
    return [(base, base + m), (base + 2 * m, base + m)]


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NAMES])
def test_backbone_meets_the_contract(name):
    torch.manual_seed(0)
    backbone = zoo.create_backbone(name).eval()
    assert isinstance(backbone, Backbone)
    n = len(backbone.out_indices)
    assert len(backbone.out_channels) == len(backbone.out_strides) == n
    assert backbone.coarsest_stride == max(backbone.out_strides)
    for h, w in sizes_for(backbone):
        with torch.no_grad():
            maps, prefix = backbone.forward_taps(torch.randn(1, backbone.in_chans, h, w))
        assert [tuple(m.shape) for m in maps] == [(1, c, h // s, w // s) for c, s in
                                                  zip(backbone.out_channels, backbone.out_strides)], (h, w)
        if backbone.prefix_names:  # a hybrid's convolutional taps carry none (prefix_taps)
            assert len(backbone.prefix_taps) == n and any(backbone.prefix_taps)
            assert [None if p is None else tuple(p.shape) for p in prefix] == [
                (1, len(backbone.prefix_names), c) if tokens else None
                for c, tokens in zip(backbone.out_channels, backbone.prefix_taps)]
        else:
            assert not any(backbone.prefix_taps)
            assert prefix is None
    params = dict(backbone.named_parameters())
    declared = backbone.no_weight_decay()
    assert declared <= set(params)
    tables = {k for k in params if any(part in f'.{k}' for part in ('.pos_embed.', '.pos_bias.', '.prefix.'))}
    assert tables <= declared and tables, sorted(tables - declared)
