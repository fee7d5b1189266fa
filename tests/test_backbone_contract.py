"""Every registered backbone meets the contract (zoo.contract): map i has out_channels[i] channels and is exactly
input / out_strides[i] at two non-square sizes that are multiples of input_multiple; token backbones give
len(prefix_names) prefix tokens per tap with the tap's width, the others none; no_weight_decay names real
parameters, and every position table, prefix token and relative-position table is among them."""
import math

import pytest
import torch

import zoo
from zoo.backbones.dinov2 import EXPENSIVE as DINOV2_EXPENSIVE
from zoo.contract import Backbone

#: Names too costly to build here -> the cheaper name that covers the same code paths (and is tested).
EXPENSIVE = {**DINOV2_EXPENSIVE}
NAMES = [name for name in zoo.list_backbones() if name not in EXPENSIVE]


def test_expensive_names_are_covered_by_tested_ones():
    assert set(EXPENSIVE.values()) <= set(NAMES)


def sizes_for(backbone: Backbone) -> list[tuple[int, int]]:
    """Two non-square sizes, multiples of the input multiple, above the smallest input."""
    m = backbone.input_multiple
    base = max(m, math.ceil(64 / m) * m)
    return [(base, base + m), (base + 2 * m, base + m)]


@pytest.mark.parametrize('name', NAMES)
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
        if backbone.prefix_names:
            assert [tuple(p.shape) for p in prefix] == [(1, len(backbone.prefix_names), c)
                                                        for c in backbone.out_channels]
        else:
            assert prefix is None
    params = dict(backbone.named_parameters())
    declared = backbone.no_weight_decay()
    assert declared <= set(params)
    tables = {k for k in params if any(part in f'.{k}' for part in ('.pos_embed.', '.pos_bias.', '.prefix.'))}
    assert tables <= declared and tables, sorted(tables - declared)
