"""Perception Encoder towers (zoo.backbones.pe): every registered name is one of timm's ``vit_pe_*`` and builds timm's
model (keys, shapes, parameter count, on the meta device); reduced towers of each code path (core: CLS token, RoPE
from position 1, MAP head of 8 heads over every token; lang: LayerScale, no final norm, mean of the patch tokens;
the gigantic towers: no CLS token, RoPE from position 0) give timm's logits, pooled features and features from timm's
perturbed weights at the native size and a non-square one; the backbone's taps equal timm's intermediates at
non-square sizes; the RoPE offset is its formula. transformers 5.24 has no PE image model of its own."""
import pytest
import torch

import zoo
from zoo.core import ProbePool
from zoo.core.rope import AxialRope

from ..reference import (
    assert_classifier_equals_timm,
    assert_taps_equal_timm_intermediates,
    classifier_from_timm_file,
    meta_pair,
    meta_pair_with_timms_keys,
)

timm = pytest.importorskip('timm')
NAMES = zoo.list_backbones('vit_pe_*')
SMALLEST = 'vit_pe_core_tiny_patch16_384'
NARROW = dict(embed_dim=96, num_heads=4)  # the wide towers' code paths at a test's width
BIG = ('large', 'gigantic')


def test_the_registered_names_are_timms_pe_names():
    assert NAMES == sorted(timm.list_models('vit_pe_*')) and len(NAMES) == 12


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if any(b in n for b in BIG) else n
                                  for n in NAMES])  # ~1 s each on the meta device
def test_registered_options_build_timms_keys_shapes_and_parameter_count(name):
    ours, reference = meta_pair_with_timms_keys(name)
    assert ours.blocks[0].norm1.eps == 1e-5 and ours.num_prefix_tokens == reference.num_prefix_tokens
    rope = ours.blocks[0].attn.rope
    assert isinstance(rope, AxialRope) and rope.indexing == 'xy' and rope.offset == (0.0 if 'gigantic' in name else 1.0)
    if '_core_' in name:
        assert isinstance(ours.attn_pool, ProbePool) and ours.attn_pool.attn.num_heads == 8 and ours.pool_prefix
    else:
        assert isinstance(ours.norm, torch.nn.Identity) and isinstance(ours.fc_norm, torch.nn.Identity)


def test_the_smallest_full_size_count_is_timms():
    ours, reference = meta_pair(SMALLEST)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters()) == 6_141_056


# name, width override, non-square size: one case per code path
PATHS = [(SMALLEST, {}, (160, 96)),                                      # CLS, offset 1, MAP head over CLS + patches
         ('vit_pe_lang_large_patch14_448', NARROW, (70, 126)),           # LayerScale, no final norm, mean of patches
         ('vit_pe_core_gigantic_patch14_448', NARROW, (126, 70)),        # no CLS, offset 0, MAP head of 8 heads
         ('vit_pe_spatial_gigantic_patch14_448', NARROW, (126, 70))]     # no CLS, LayerScale, mean of patches


@pytest.mark.parametrize('name,small,size', PATHS)
def test_logits_and_pooled_features_equal_timm(name, small, size, tmp_path):
    ours, reference, native = classifier_from_timm_file(name, tmp_path, **small)
    assert ours.blocks[0].norm1.weight.ne(1).any()  # perturbed: the norms are exercised
    if 'lang' in name or 'spatial_gigantic' in name:
        assert ours.blocks[0].ls1.gamma.ne(0.1).any()  # and LayerScale
    assert_classifier_equals_timm(ours, reference, (native, size))


@pytest.mark.parametrize('name,small', [(SMALLEST, {}), ('vit_pe_spatial_gigantic_patch14_448', NARROW)])
def test_backbone_taps_equal_timms_intermediates_at_non_square_sizes(name, small, tmp_path):
    assert_taps_equal_timm_intermediates(name, tmp_path, prefix=False, **small)


def test_the_rope_offset_shifts_the_indices_before_the_rescaling():
    rope = AxialRope(8, temperature=10000.0, indexing='xy', ref_grid=(4, 6), offset=1.0)
    angles = rope.angles((2, 3), 'cpu')[0]  # (h w) (d/2): [x bands | y bands], bands 1 and 1/100
    x = torch.tensor([1., 2., 3.] * 2) * 6 / 3  # columns 1..3 on a 3-wide grid rescaled to 6
    y = torch.tensor([1.] * 3 + [2.] * 3) * 4 / 2  # rows 1..2 on a 2-high grid rescaled to 4
    want = torch.stack([x, x / 100, y, y / 100], dim=-1)
    assert torch.allclose(angles, want)


def test_list_models_reports_pe_names_with_timms_counts():
    import list_models
    names = ['vit_pe_core_tiny_patch16_384', 'vit_pe_spatial_tiny_patch16_512', 'vit_pe_core_base_patch16_224']
    rows = {r['name']: r for r in list_models.main(names)}
    for name in names:
        with torch.device('meta'):
            reference = timm.create_model(name, pretrained=False)
        assert rows[name]['classifier_params_M'] == round(sum(p.numel() for p in reference.parameters()) / 1e6, 2)
    assert rows[SMALLEST]['input'] == '384x384' and rows[SMALLEST]['out_strides'] == [16] * 4
    assert rows['vit_pe_spatial_tiny_patch16_512']['backbone_params_M'] == 5.68  # headless: the same tower
