"""CoAtNet against timm: logits and stage maps at the build size and at other sizes (timm rebuilt for that size
with its own checkpoint filter), parameter and MAC counts, the relative-bias resize, training-mode numerics."""
import pytest
import torch

import zoo
from zoo.core import ConvBN, RelPosBias
from zoo.core.rel_pos import resize_offset_table
from zoo.profiling import count_macs, count_params

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')
from timm.models.maxxvit import checkpoint_filter_fn  # noqa: E402

SHALLOW = dict(depths=(1, 2, 2, 1))  # full widths and block types, fewer blocks


def reference(name: str, path, **kwargs):
    """timm's model with noisy weights and non-trivial BN statistics, saved to ``path`` (safetensors)."""
    torch.manual_seed(0)
    ref = timm_reference(name, **kwargs)
    for m in ref.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_(0.0, 0.2)
            m.running_var.uniform_(0.5, 2.0)
    return ref, save_safetensors(ref, path)


def timm_at(name: str, ref, size, **kwargs):
    """timm's model built for ``size``, loaded from ``ref``'s weights through timm's checkpoint filter."""
    model = timm.create_model(name, img_size=size, num_classes=1000, **kwargs).eval()
    model.load_state_dict(checkpoint_filter_fn(ref.state_dict(), model))
    return model


@pytest.mark.slow
@pytest.mark.parametrize('name,kwargs', [
    ('coatnet_0_rw_224', {}),
    ('coatnet_0_224', {}),
    ('coatnet_1_rw_224', SHALLOW),       # strided depthwise conv instead of pooling
    ('coatnet_rmlp_1_rw_224', SHALLOW),  # max pooling, relative-position MLP
])
def test_logits_match_timm_at_224_and_at_sizes_timm_must_be_rebuilt_for(name, kwargs, tmp_path):
    ref, path = reference(name, tmp_path / 'w.safetensors', **kwargs)
    ours = zoo.create_classifier(name, pretrained=path, **kwargs).eval()  # built for 224 only
    with torch.no_grad():
        x = torch.randn(2, 3, 224, 224)
        diff = (ours(x) - ref(x)).abs().max().item()
        assert diff <= 1e-4, f"{name} at 224: max abs diff {diff}"
        for size in ((288, 288), (256, 320)):
            x = torch.randn(1, 3, *size)
            diff = (ours(x) - timm_at(name, ref, size, **kwargs)(x)).abs().max().item()
            assert diff <= 1e-4, f"{name} at {size}: max abs diff {diff}"


@pytest.mark.slow
def test_backbone_maps_match_timm_intermediates_at_every_stride(tmp_path):
    ref, path = reference('coatnet_0_rw_224', tmp_path / 'w.safetensors', **SHALLOW)
    backbone = zoo.create_backbone('coatnet_0_rw_224', pretrained=path, out_indices=(0, 1, 2, 3, 4), **SHALLOW)
    backbone.eval()
    assert backbone.out_strides == [2, 4, 8, 16, 32] and backbone.out_channels == [64, 96, 192, 384, 768]
    x = torch.randn(2, 3, 192, 256)
    with torch.no_grad():
        maps = backbone(x)
        expected = timm_at('coatnet_0_rw_224', ref, (192, 256), **SHALLOW).forward_intermediates(
            x, intermediates_only=True)
    for ours_map, ref_map in zip(maps, expected, strict=True):
        torch.testing.assert_close(ours_map, ref_map, atol=1e-4, rtol=1e-4)


def test_any_input_size_gives_ceil_halved_maps():
    backbone = zoo.create_backbone('coatnet_0_224', depths=(1, 1, 1, 1)).eval()
    with torch.no_grad():
        maps = backbone(torch.randn(1, 3, 200, 137))
    sizes = [(200, 137)]
    for _ in range(5):
        sizes.append(((sizes[-1][0] + 1) // 2, (sizes[-1][1] + 1) // 2))
    assert [tuple(m.shape[-2:]) for m in maps] == sizes[2:]
    assert [m.shape[1] for m in maps] == [96, 192, 384, 768]


@pytest.mark.slow
def test_training_mode_matches_timm_and_backpropagates(tmp_path):
    """Batch statistics, unfused BN and the gated BN path: timm in train mode gives the same logits."""
    ref, path = reference('coatnet_0_rw_224', tmp_path / 'w.safetensors', **SHALLOW)
    ours = zoo.create_classifier('coatnet_0_rw_224', pretrained=path, **SHALLOW).train()
    ref.train()
    x = torch.randn(2, 3, 128, 128)
    x_ref = timm_at('coatnet_0_rw_224', ref, (128, 128), **SHALLOW).train()
    out = ours(x)
    torch.testing.assert_close(out, x_ref(x), atol=1e-4, rtol=1e-4)
    out.square().mean().backward()
    grads = {n: p.grad for n, p in ours.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
    assert grads['stages.2.blocks.0.attn.pos_bias.table'].abs().sum() > 0


def test_inference_leaves_the_input_untouched_and_eval_bn_folding_is_exact():
    torch.manual_seed(0)
    conv = ConvBN(8, 16, 3, act_layer=torch.nn.SiLU)
    conv.norm.running_mean.normal_()
    conv.norm.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 8, 9, 11)
    conv.eval()
    with torch.no_grad():
        reference_out = torch.nn.functional.silu(conv.norm(conv.conv(x)))
        torch.testing.assert_close(conv(x), reference_out, atol=1e-5, rtol=1e-5)
    model = zoo.create_backbone('coatnet_rmlp_1_rw_224', depths=(1, 1, 1, 1)).eval()
    x = torch.randn(1, 3, 64, 64)
    kept = x.clone()
    with torch.inference_mode():
        first = [m.clone() for m in model(x)]
        second = model(x)
    assert torch.equal(x, kept)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize('src,dst', [((14, 14), (18, 18)), ((14, 14), (16, 20)), ((7, 7), (5, 9))])
def test_bias_table_resize_is_timms_checkpoint_resize(src, dst):
    from timm.layers import resize_rel_pos_bias_table
    table = torch.randn(4, 2 * src[0] - 1, 2 * src[1] - 1)
    size = (2 * dst[0] - 1, 2 * dst[1] - 1)
    flat = table.flatten(1).T  # timm's '(dy dx) heads'
    expected = resize_rel_pos_bias_table(flat, new_window_size=dst, new_bias_shape=(size[0] * size[1], 4))
    torch.testing.assert_close(resize_offset_table(table, size).flatten(1).T, expected, atol=1e-5, rtol=1e-5)


def test_cached_inference_bias_follows_parameter_updates():
    bias = RelPosBias((4, 4), num_heads=2).eval()
    with torch.no_grad():
        before = bias((5, 3)).clone()
        bias.table.add_(1.0)
        after = bias((5, 3))
    torch.testing.assert_close(after, before + 1.0)


def test_a_grid_first_seen_in_inference_mode_trains_later():
    bias = RelPosBias((3, 3), num_heads=2)
    with torch.inference_mode():
        bias((5, 3))  # a grid no other test uses: its offsets are made here first
    bias((5, 3)).sum().backward()
    assert bias.table.grad is not None and bias.table.grad.abs().sum() > 0


@pytest.mark.slow
def test_checkpoint_for_224_loads_into_a_model_built_for_384_with_resized_tables(tmp_path):
    ref, path = reference('coatnet_0_rw_224', tmp_path / 'w.safetensors', **SHALLOW)
    ours = zoo.create_classifier('coatnet_0_rw_224', img_size=384, **SHALLOW).eval()
    report = zoo.load_pretrained(ours, path)
    assert report.resized == ['stages.2.blocks.0.attn.pos_bias.table', 'stages.2.blocks.1.attn.pos_bias.table',
                              'stages.3.blocks.0.attn.pos_bias.table']
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), timm_at('coatnet_0_rw_224', ref, 384, **SHALLOW)(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('name', ['coatnet_0_rw_224', 'coatnet_0_224',
                                  pytest.param('coatnet_1_rw_224', marks=pytest.mark.slow),
                                  pytest.param('coatnet_rmlp_1_rw_224', marks=pytest.mark.slow),
                                  pytest.param('coatnet_2_224', marks=pytest.mark.slow)])
def test_parameter_count_equals_timm(name):
    assert count_params(zoo.create_classifier(name)) == count_params(timm.create_model(name))


@pytest.mark.slow
def test_coatnet_0_rw_size_and_cost_are_the_published_ones():
    ours = zoo.create_classifier('coatnet_0_rw_224').eval()
    ref = timm.create_model('coatnet_0_rw_224').eval()
    x = torch.randn(1, 3, 224, 224)
    assert round(count_params(ours) / 1e6, 1) == 27.4  # timm's model card
    macs = count_macs(ours, x)
    assert macs == count_macs(ref, x)
    assert abs(macs / 1e9 - 4.43) / 4.43 < 0.01  # 4.41 here: the card's counter adds a few elementwise ops


def test_unknown_options_are_named():
    with pytest.raises(ValueError, match='block_types'):
        zoo.create_backbone('coatnet_0_224', block_types='CCXT')
    with pytest.raises(ValueError, match='out_indices'):
        zoo.create_backbone('coatnet_0_224', out_indices=(3, 1))
