"""ViT/DeiT against timm: logits, dense features, parameter counts and published GMACs."""
import pytest
import torch

import zoo
from zoo.profiling import count_macs, count_params

from ..reference import meta_pair, save_safetensors, timm_reference

timm = pytest.importorskip('timm')

# RoPE ViTs (timm's EVA model): their code paths are checked on the small names in tests/backbones/test_rope_alibi.py;
# DINOv2 (patch 14, 518x518) is compared with timm in tests/backbones/test_dinov2.py, the CLIP towers (reduced
# depth) in tests/backbones/test_clip.py, the SigLIP towers (reduced depth) in tests/backbones/test_siglip.py, DINOv3
# (reduced depth; its huge and 7B sizes only ever on the meta device) in tests/backbones/test_dinov3.py, the
# Perception Encoder towers (reduced depth and width; gigantic ones among them) in tests/backbones/test_pe.py, the
# C-RADIO backbones (reduced depth and width; huge, giant and so400m ones only on the meta device, and timm's own
# non-square reference is its model built at that size) in tests/backbones/test_radio.py; AIMv2 (aimv2_*, not listed
# here; reduced depth and width) in tests/backbones/test_aimv2.py
UP_TO_BASE = [n for n in zoo.list_backbones('vit_*') + zoo.list_backbones('deit_*')
              if 'large' not in n and '_rope' not in n and 'dinov2' not in n and '_clip_' not in n
              and '_siglip' not in n and '_dinov3' not in n and not n.startswith('vit_pe_')
              and '_radio_' not in n and '_intern' not in n]  # InternViT-300M: reduced, in test_internvit.py
BASE = {n for n in UP_TO_BASE if 'base' in n}


def larger_non_square(size):
    return size[0] + 32, size[1] + 96  # multiples of 32, so every patch size tiles it


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if n in BASE else n for n in UP_TO_BASE])
def test_logits_match_timm_at_native_and_larger_non_square_size(name, tmp_path):
    ref = timm_reference(name, dynamic_img_size=True)
    ours = zoo.create_classifier(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors'),
                                 num_classes=ref.num_classes).eval()
    size = ours.pretrained_cfg['input_size']
    with torch.no_grad():
        for hw in (size, larger_non_square(size)):
            x = torch.randn(1, 3, *hw)
            diff = (ours(x) - ref(x)).abs().max().item()
            assert diff <= 1e-4, f"{name} at {hw}: max abs diff {diff}"


@pytest.mark.parametrize('name', ['vit_small_patch16_224', 'deit_small_distilled_patch16_224',
                                  pytest.param('vit_base_patch16_reg4_gap_256', marks=pytest.mark.slow)])
def test_dense_features_match_timm_intermediates(name, tmp_path):
    ref = timm_reference(name, dynamic_img_size=True)
    backbone = zoo.create_backbone(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    assert backbone.out_indices == (2, 5, 8, 11)
    x = torch.randn(2, 3, 224, 320)
    with torch.no_grad():
        maps, prefixes = backbone.forward_taps(x)
        ref_maps, ref_prefixes = zip(*ref.forward_intermediates(
            x, indices=[2, 5, 8, 11], norm=False, output_fmt='NCHW', intermediates_only=True,
            return_prefix_tokens=True))
    for ours_map, ref_map, ours_p, ref_p in zip(maps, ref_maps, prefixes, ref_prefixes):
        assert ours_map.shape == (2, backbone.embed_dim, 14, 20)
        torch.testing.assert_close(ours_map, ref_map, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(ours_p, ref_p, atol=1e-4, rtol=1e-4)
    assert backbone.out_channels == [backbone.embed_dim] * 4 and backbone.out_strides == [16] * 4


@pytest.mark.parametrize('name,kwargs', [
    ('vit_tiny_patch16_224', dict(global_pool='avg')),       # mean pooling: timm's fc_norm after pooling
    ('vit_tiny_patch16_224', dict(init_values=1e-5)),        # LayerScale
    ('vit_tiny_patch16_224', dict(reg_tokens=4)),            # registers covered by the position table
    ('vit_tiny_patch16_224', dict(reg_tokens=2, class_token=False, no_embed_class=True, global_pool='avg')),
])
def test_options_match_timm(name, kwargs, tmp_path):
    ref = timm_reference(name, **kwargs)
    ours_kwargs = dict(kwargs)
    if ours_kwargs.pop('no_embed_class', False):
        ours_kwargs['pos_embed_prefix'] = False
    ours = zoo.create_classifier(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors'),
                                 **ours_kwargs).eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), atol=1e-4, rtol=1e-4)


def test_distilled_training_returns_both_heads_and_eval_their_mean(tmp_path):
    ref = timm_reference('deit_tiny_distilled_patch16_224')
    ours = zoo.create_classifier('deit_tiny_distilled_patch16_224',
                                 pretrained=save_safetensors(ref, tmp_path / 'w.safetensors'))
    ref.set_distilled_training(True)
    x = torch.randn(2, 3, 224, 224)
    ours.train(), ref.train()
    cls, dist = ours(x)
    ref_cls, ref_dist = ref(x)
    torch.testing.assert_close(cls, ref_cls, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dist, ref_dist, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(cls, dist)
    ours.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), (cls + dist).detach() / 2, atol=1e-5, rtol=1e-5)


def test_dist_token_reaches_the_output_only_through_its_head():
    model = zoo.create_classifier('deit_tiny_distilled_patch16_224', num_classes=10).train()
    tokens = model.forward_features(torch.randn(2, 3, 32, 48))
    changed = tokens.clone()
    changed[:, 1] += 1.0  # move the distillation token's final state only
    cls, dist = model.forward_head(tokens)
    cls2, dist2 = model.forward_head(changed)
    torch.testing.assert_close(cls2, cls)
    assert not torch.allclose(dist2, dist)
    torch.testing.assert_close(dist2 - dist, model.head_dist.weight.sum(1).expand(2, 10), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('name', [n for n in zoo.list_backbones('vit_*') + zoo.list_backbones('deit_*')
                                  if not n.startswith('vit_pe_')])  # PE's counts: tests/backbones/test_pe.py
def test_parameter_counts_equal_timm(name):
    ours, ref = meta_pair(name)  # both: the class count of the default weights
    assert count_params(ours) == count_params(ref)


@pytest.mark.parametrize('name,published_gmacs,published_params', [
    ('vit_base_patch16_224', 17.58, 86.6),
    ('deit_tiny_patch16_224', 1.26, 5.7),
    ('deit_small_patch16_224', 4.61, 22.1),
    ('deit_base_patch16_224', 17.58, 86.6),
])
def test_flops_and_params_match_published_figures(name, published_gmacs, published_params):
    model = zoo.create_classifier(name).eval()
    gmacs = count_macs(model, torch.randn(1, 3, 224, 224)) / 1e9
    assert gmacs == pytest.approx(published_gmacs, rel=0.02)
    assert count_params(model) / 1e6 == pytest.approx(published_params, abs=0.05)


def test_default_taps_for_12_and_24_block_models():
    with torch.device('meta'):
        assert zoo.create_backbone('vit_base_patch16_224').out_indices == (2, 5, 8, 11)
        large = zoo.create_backbone('vit_large_patch16_384')
        assert large.out_indices == (5, 11, 17, 23) and large.out_channels == [1024] * 4
        custom = zoo.create_backbone('vit_small_patch16_224', out_indices=(3, -1))
        assert custom.out_indices == (3, 11) and len(custom.blocks) == 12
        assert len(zoo.create_backbone('vit_small_patch16_224', out_indices=(1, 4)).blocks) == 5


def test_model_attention_maps_come_from_the_explicit_path_of_each_block():
    model = zoo.create_classifier('vit_tiny_patch16_224', num_classes=0).eval()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        maps = model.attention_maps(x)
        tokens, grid = model.embed(x)
        for block in model.blocks[:2]:
            _, expected = block.attn(block.norm1(tokens), return_attn=True)
            tokens = block(tokens)
    assert len(maps) == 12 and maps[0].shape == (1, 3, 1 + 4 * 6, 1 + 4 * 6)
    torch.testing.assert_close(maps[1], expected)
    torch.testing.assert_close(maps[-1].sum(-1), torch.ones(1, 3, 25))
