"""Swin V1 / V2 against timm: logits at the native size and at larger non-square sizes (timm built for that size),
parameter and MAC counts, backbone maps against ``forward_intermediates``, padded and shrunk-window sizes, the official
layout; and the core options Swin added (cosine similarity, residual post-norm, Swin V2's position MLP)."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.core import Attention, Block, RelPosMlp, no_weight_decay_of, vit_parts
from zoo.core.similarity import CosineSimilarity
from zoo.core.windows import fit_window
from zoo.profiling import count_macs, count_params
from zoo.weights.swin import swin_from_timm

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')
from timm.models import swin_transformer, swin_transformer_v2  # noqa: E402

SHALLOW = dict(depths=(2, 2, 2, 2))  # every code path (shifted blocks in every stage), fewer blocks


def filter_fn(name: str):
    return (swin_transformer_v2 if name.startswith('swinv2') else swin_transformer).checkpoint_filter_fn


def reference(name: str, path, **kwargs):
    torch.manual_seed(0)
    ref = timm_reference(name, **kwargs)
    return ref, save_safetensors(ref, path)


def timm_at(name: str, ref, size, **kwargs):
    """timm's model built for ``size``, given ``ref``'s weights through timm's checkpoint filter."""
    model = timm.create_model(name, img_size=size, num_classes=1000, **kwargs).eval()
    model.load_state_dict(filter_fn(name)(ref.state_dict(), model))
    return model


def max_diff(a, b) -> float:
    return (a - b).abs().max().item()


@pytest.mark.slow
@pytest.mark.parametrize('name,native,larger,params_m,gmacs', [
    ('swin_tiny_patch4_window7_224', 224, (256, 320), 28.29, 4.5),   # published 28.3 M, 4.5 G
    ('swinv2_tiny_window8_256', 256, (288, 352), 28.35, None),        # published 28.3 M
])
def test_tiny_logits_params_and_macs_equal_timm(name, native, larger, params_m, gmacs, tmp_path):
    ref, path = reference(name, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, pretrained=path).eval()
    x = torch.randn(1, 3, native, native)
    with torch.no_grad():
        assert max_diff(ours(x), ref(x)) <= 1e-4, name
        x = torch.randn(1, 3, *larger)  # needs padding to window multiples in some stage
        assert max_diff(ours(x), timm_at(name, ref, larger)(x)) <= 1e-4, (name, larger)
    assert count_params(ours) == count_params(ref)
    assert count_params(ours) / 1e6 == pytest.approx(params_m, abs=0.01)
    x = torch.randn(1, 3, native, native)
    ours_macs, ref_macs = count_macs(ours, x), count_macs(ref, x)
    assert ours_macs == pytest.approx(ref_macs, rel=0.01)
    if gmacs is not None:
        assert ours_macs / 1e9 == pytest.approx(gmacs, rel=0.02)


@pytest.mark.slow
def test_swin_base_window12_384_logits_equal_timm(tmp_path):
    name = 'swin_base_patch4_window12_384'
    ref, path = reference(name, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, pretrained=path).eval()
    assert count_params(ours) == count_params(ref)
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        assert max_diff(ours(x), ref(x)) <= 1e-4


@pytest.mark.slow
@pytest.mark.parametrize('name', ['swin_tiny_patch4_window7_224', 'swinv2_tiny_window8_256'])
def test_backbone_maps_equal_timm_intermediates_and_carry_one_norm_each(name, tmp_path):
    ref, path = reference(name, tmp_path / 'w.safetensors', **SHALLOW)
    size = (224, 448) if name.startswith('swin_') else (256, 512)  # window multiples at every stage: no padding
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        expected = timm_at(name, ref, size, **SHALLOW).forward_intermediates(x, intermediates_only=True)
        bare = zoo.create_backbone(name, pretrained=path, out_norms=False, **SHALLOW).eval()
        assert bare.out_strides == [4, 8, 16, 32] and bare.out_channels == [96, 192, 384, 768]
        for ours_map, ref_map in zip(bare(x), expected, strict=True):
            assert max_diff(ours_map, ref_map) <= 1e-4
        normed = zoo.create_backbone(name, pretrained=path, **SHALLOW).eval()
        for norm in normed.out_norms:
            norm.weight.normal_(1.0, 0.1), norm.bias.normal_(0.0, 0.1)
        for norm, ours_map, ref_map in zip(normed.out_norms, normed(x), expected, strict=True):
            want = F.layer_norm(ref_map.permute(0, 2, 3, 1), (ref_map.shape[1],), norm.weight, norm.bias)
            assert max_diff(ours_map, want.permute(0, 3, 1, 2)) <= 1e-4


@pytest.mark.parametrize('name', ['swin_tiny_patch4_window7_224', 'swinv2_tiny_window16_256'])
def test_windows_larger_than_the_map_shrink_as_timm_built_for_that_size(name, tmp_path):
    """64x96: maps 16x24 .. 2x3, smaller than the window on one or both sides (V1 resizes its bias table as
    timm's checkpoint filter does; V2's position MLP is evaluated on the shrunk window)."""
    ref, path = reference(name, tmp_path / 'w.safetensors', **SHALLOW)
    ours = zoo.create_classifier(name, pretrained=path, **SHALLOW).eval()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        assert max_diff(ours(x), timm_at(name, ref, (64, 96), **SHALLOW)(x)) <= 1e-4
    assert fit_window((2, 3), (7, 7), (3, 3)) == ((2, 3), (0, 0))
    assert fit_window((5, 20), (7, 7), (3, 3)) == ((5, 7), (0, 3))


@pytest.mark.slow
def test_any_size_pads_the_image_and_the_maps_are_ceil_strided_and_finite(tmp_path):
    name = 'swin_tiny_patch4_window7_224'
    ref, path = reference(name, tmp_path / 'w.safetensors', **SHALLOW)
    backbone = zoo.create_backbone(name, pretrained=path, **SHALLOW).eval()
    x = torch.randn(1, 3, 250, 330)
    with torch.no_grad():
        maps = backbone(x)
        assert [tuple(m.shape[-2:]) for m in maps] == [(math.ceil(250 / s), math.ceil(330 / s))
                                                      for s in backbone.out_strides]
        assert all(torch.isfinite(m).all() for m in maps)
        # the image is zero-padded at the bottom/right to whole patches: timm built for 252x332 on that image
        classifier = zoo.create_classifier(name, pretrained=path, **SHALLOW).eval()
        padded = F.pad(x, (0, 2, 0, 2))
        assert max_diff(classifier(x), timm_at(name, ref, (252, 332), **SHALLOW)(padded)) <= 1e-4


def official_layout(state: dict) -> dict:
    """timm's keys in microsoft/Swin-Transformer's layout: merging at the end of the previous stage, ``head``, and
    the buffers the official checkpoints carry."""
    out = {}
    for key, value in state.items():
        key = re.sub(r'^layers\.(\d+)\.downsample', lambda m: f'layers.{int(m.group(1)) - 1}.downsample', key)
        out[key.replace('head.fc.', 'head.')] = value
        if key.endswith('relative_position_bias_table'):
            out[key.replace('relative_position_bias_table', 'relative_position_index')] = torch.zeros(49, 49).long()
    return out


@pytest.mark.slow
@pytest.mark.parametrize('name', ['swin_tiny_patch4_window7_224', 'swinv2_tiny_window8_256'])
def test_official_layout_loads_and_classifier_checkpoints_load_into_the_backbone(name, tmp_path):
    from safetensors.torch import save_file
    ref, _ = reference(name, tmp_path / 'w.safetensors', depths=(2, 2, 2, 2))
    path = str(tmp_path / 'official.safetensors')
    save_file({k: v.contiguous() for k, v in official_layout(ref.state_dict()).items()}, path)
    ours = zoo.create_classifier(name, depths=(2, 2, 2, 2)).eval()
    report = zoo.load_pretrained(ours, path)
    assert not report.missing and not report.unexpected
    size = 224 if name.startswith('swin_') else 256
    x = torch.randn(1, 3, size, size)
    with torch.no_grad():
        assert max_diff(ours(x), ref(x)) <= 1e-4
    backbone = zoo.create_backbone(name, depths=(2, 2, 2, 2))
    report = zoo.load_pretrained(backbone, path)
    assert sorted(report.dropped) == ['head.bias', 'head.weight', 'norm.bias', 'norm.weight']
    assert report.fresh == [f'out_norms.{i}.{p}' for i in range(4) for p in ('weight', 'bias')]


@pytest.mark.parametrize('name', ['swin_tiny_patch4_window7_224', 'swinv2_tiny_window8_256'])
def test_no_weight_decay_names_are_timms(name):
    ref = timm.create_model(name, depths=(1, 1, 1, 1), pretrained=False)
    ours = zoo.create_classifier(name, depths=(1, 1, 1, 1))
    converted = set(swin_from_timm({k: torch.zeros(4, 4) for k in ref.no_weight_decay()}))
    assert no_weight_decay_of(ours) == converted and converted


def test_training_step_matches_timm_and_reaches_every_parameter(tmp_path):
    name = 'swinv2_tiny_window8_256'
    ref, path = reference(name, tmp_path / 'w.safetensors', depths=(1, 2, 1, 1))
    ours = zoo.create_classifier(name, pretrained=path, depths=(1, 2, 1, 1)).train()
    ref.train()
    x = torch.randn(2, 3, 64, 64)
    out = ours(x)
    in_training = timm_at(name, ref, (64, 64), depths=(1, 2, 1, 1), drop_path_rate=0.0).train()
    torch.testing.assert_close(out, in_training(x), atol=1e-4, rtol=1e-4)
    out.square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in ours.parameters())
    assert ours.layers[1].blocks[1].attn.logit_scale.grad.abs().sum() > 0


class CosineAttention(CosineSimilarity, Attention):
    """The cosine similarity part on plain (unwindowed) attention."""


def test_cosine_similarity_is_the_formula_on_both_paths():
    torch.manual_seed(0)
    attn = CosineAttention(32, 4).eval()
    with torch.no_grad():
        attn.logit_scale.copy_(torch.tensor([1.0, 2.0, 3.0, 6.0]).view(4, 1, 1))  # the last one clamped to log 100
        x = torch.randn(2, 10, 32)
        q, k, v = (t.view(2, 10, 4, 8).transpose(1, 2) for t in attn.qkv(x))
        scale = torch.tensor([1.0, 2.0, 3.0, math.log(100.0)]).exp().view(4, 1, 1)
        scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * scale
        want = attn.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 10, 32))
        fused = attn(x)
        explicit, weights = attn(x, return_attn=True)
    torch.testing.assert_close(fused, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, want, atol=1e-5, rtol=1e-5)
    assert no_weight_decay_of(attn) == {'logit_scale'} and list(attn.state_dict())[0] == 'logit_scale'


def test_residual_post_norm_block_is_the_formula():
    torch.manual_seed(0)
    block = Block(16, **vit_parts(16, 2), norm_layer=torch.nn.LayerNorm, norm_placement='res_post').eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        mid = x + block.norm1(block.attn(x))
        torch.testing.assert_close(block(x), mid + block.norm2(block.mlp(mid)))
        assert Block(16, **vit_parts(16, 2)).norm_placement == 'pre'


@pytest.mark.parametrize('window,pretrained', [((8, 8), None), ((16, 16), (12, 12)), ((5, 7), None)])
def test_swin_position_mlp_equals_timms_cpb_mlp(window, pretrained):
    torch.manual_seed(0)
    ref = swin_transformer_v2.WindowAttention(32, window, 4, pretrained_window_size=pretrained or (0, 0))
    ours = RelPosMlp(4, 512, drop=0.0, mode='swin', pretrained_window=pretrained)
    with torch.no_grad():
        for p in ref.cpb_mlp.parameters():
            p.normal_(0.0, 0.5)
        ours.mlp.fc1.weight.copy_(ref.cpb_mlp[0].weight), ours.mlp.fc1.bias.copy_(ref.cpb_mlp[0].bias)
        ours.mlp.fc2.weight.copy_(ref.cpb_mlp[2].weight)
        table = ref.cpb_mlp(ref.relative_coords_table).view(-1, 4)[ref.relative_position_index.view(-1)]
        n = window[0] * window[1]
        want = 16 * torch.sigmoid(table.view(n, n, 4).permute(2, 0, 1))
        torch.testing.assert_close(ours(window), want, atol=1e-6, rtol=1e-6)
    assert ours.mlp.fc2.bias is None


def test_a_window7_checkpoint_loads_into_a_window12_model_with_timms_table_resize(tmp_path):
    narrow = dict(depths=(2, 2, 2, 2), embed_dim=32, num_heads=(1, 2, 4, 8))
    name = 'swin_tiny_patch4_window7_224'
    ref, path = reference(name, tmp_path / 'w.safetensors', **narrow)
    ours = zoo.create_classifier(name, window=12, img_size=384, **narrow).eval()
    report = zoo.load_pretrained(ours, path)
    assert len(report.resized) == 8 and all(k.endswith('.attn.pos_bias.table') for k in report.resized)
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        assert max_diff(ours(x), timm_at(name, ref, (384, 384), window_size=12, **narrow)(x)) <= 1e-4


def test_shifted_window_attention_is_masked_full_attention_over_the_rolled_map():
    """Written out: roll the map by -shift, attend over all tokens with -inf between windows and -100 between
    shift regions of a window, roll back; the weights come back over the map."""
    from zoo.core import ShiftedWindowAttention
    torch.manual_seed(0)
    attn = ShiftedWindowAttention(16, 2, (2, 3), shifted=True).eval()
    (h, w), (wh, ww), (sy, sx) = (4, 6), (2, 3), (1, 1)
    x = torch.randn(2, h * w, 16)
    with torch.no_grad():
        out, weights = attn(x, grid=(h, w), return_attn=True)
        rolled = torch.roll(x.view(2, h, w, 16), (-sy, -sx), dims=(1, 2)).reshape(2, h * w, 16)
        q, k, v = (t.view(2, h * w, 2, 8).transpose(1, 2) for t in attn.qkv(rolled))
        ys, xs = torch.arange(h).repeat_interleave(w), torch.arange(w).repeat(h)
        # the reference's regions: rows [0, h-wh), [h-wh, h-sy), [h-sy, h), columns alike
        region = ((ys >= h - wh).long() + (ys >= h - sy).long()) * 3 + (xs >= w - ww).long() + (xs >= w - sx).long()
        same_window = ((ys[:, None] // wh) == (ys[None] // wh)) & ((xs[:, None] // ww) == (xs[None] // ww))
        bias = torch.where(region[:, None] == region[None], 0.0, -100.0).masked_fill(~same_window, float('-inf'))
        probs = ((q @ k.transpose(-2, -1)) * attn.scale + bias).softmax(-1)
        want = attn.proj((probs @ v).transpose(1, 2).reshape(2, h * w, 16))
        want = torch.roll(want.view(2, h, w, 16), (sy, sx), dims=(1, 2)).reshape(2, h * w, 16)
        back = torch.roll(torch.arange(h * w).view(h, w), (-sy, -sx), dims=(0, 1)).flatten()  # rolled -> map index
        want_weights = torch.zeros_like(weights)
        want_weights[:, :, back[:, None], back[None, :]] = probs
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, want_weights, atol=1e-6, rtol=1e-5)
