"""PiT against timm: logits at 224 (plain and distilled), any other size (positions resampled as timm resamples them),
the dense maps on the true stride grid, size and cost."""
import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.backbones.pit import to_stride_grid
from zoo.profiling import count_macs, count_params

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')


@pytest.mark.slow
@pytest.mark.parametrize('name', ['pit_s_224', 'pit_s_distilled_224'])
def test_logits_match_timm_at_224(name, tmp_path):
    torch.manual_seed(0)
    ref = timm_reference(name)
    ours = zoo.create_classifier(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        diff = (ours(x) - ref(x)).abs().max().item()
    assert diff <= 1e-4, f"{name}: max abs diff {diff}"


def _timm_for_size(name: str, state: dict, size) -> torch.nn.Module:
    """timm's model built for ``size``, with the 224 weights and the position table resized as timm resizes it
    (bicubic, antialiased, in 'd h w')."""
    ref = timm.create_model(name, img_size=size).eval()
    state = dict(state)
    state['pos_embed'] = F.interpolate(state['pos_embed'], size=ref.patch_embed.grid_size, mode='bicubic',
                                       align_corners=False, antialias=True)
    ref.load_state_dict(state)
    return ref


def test_other_non_square_size_equals_timm_built_for_it(tmp_path):
    """Our 224 model at 160x256 computes what timm builds for 160x256 (19x31 tokens) with the table resized."""
    torch.manual_seed(0)
    ref = timm_reference('pit_ti_distilled_224')
    path = save_safetensors(ref, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier('pit_ti_distilled_224', pretrained=path).eval()
    backbone = zoo.create_backbone('pit_ti_distilled_224', pretrained=path, out_indices=(0, 1, 2)).eval()
    ref_other = _timm_for_size('pit_ti_distilled_224', ref.state_dict(), (160, 256))
    assert ref_other.patch_embed.grid_size == (19, 31)
    x = torch.randn(1, 3, 160, 256)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref_other(x), atol=1e-4, rtol=1e-4)
        maps, prefix = backbone.forward_taps(x)
        ref_maps = ref_other.forward_intermediates(x, intermediates_only=True)
    # stage 1: timm's 19x31 map moved onto the stride-8 grid (20x32); the pooled stages are exact
    assert [tuple(m.shape[-2:]) for m in maps] == [(20, 32), (10, 16), (5, 8)]
    torch.testing.assert_close(maps[0], to_stride_grid(ref_maps[0]), atol=1e-4, rtol=1e-4)
    for ours_map, ref_map in zip(maps[1:], ref_maps[1:]):
        torch.testing.assert_close(ours_map, ref_map, atol=1e-4, rtol=1e-4)
    assert backbone.prefix_names == ['cls', 'dist'] and [p.shape for p in prefix] == [(1, 2, 64), (1, 2, 128),
                                                                                       (1, 2, 256)]


def test_first_map_is_interpolated_onto_the_cell_centres():
    """Token i (patch 2s, stride s) is centred at s (i + 1); cell j of the stride-s grid at s (j + 1/2). A map holding
    each token's centre must come out holding each cell's centre (inner cells: linear interpolation is exact)."""
    s, n = 8, 27
    centres = s * (torch.arange(n, dtype=torch.float64) + 1)
    fmap = centres[None, None, :, None].expand(1, 1, n, n)
    cells = to_stride_grid(fmap)[0, 0, :, 0]
    assert cells.shape == (n + 1,)
    torch.testing.assert_close(cells[1:-1], s * (torch.arange(1, n, dtype=torch.float64) + 0.5))
    assert cells[0] == centres[0] and cells[-1] == centres[-1]  # the borders repeat the edge token


def test_backbone_strides_for_pit_b_geometry():
    """pit_b: patch 14, stride 7 -> maps at strides 7/14/28, exact for multiples of 28."""
    backbone = zoo.create_backbone('pit_b_224', depths=(1, 1, 1), out_indices=(0, 1, 2)).eval()
    assert backbone.out_strides == [7, 14, 28] and backbone.input_multiple == 28
    with torch.no_grad():
        maps = backbone(torch.randn(1, 3, 56, 84))
    assert [tuple(m.shape[-2:]) for m in maps] == [(8, 12), (4, 6), (2, 3)]


def test_dense_backbone_trains_pool_and_positions():
    backbone = zoo.create_backbone('pit_ti_224', depths=(1, 1, 1))
    maps, prefix = backbone.forward_taps(torch.randn(2, 3, 64, 96))
    (sum(m.mean() for m in maps) + sum(p.mean() for p in prefix)).backward()
    assert backbone.stages[1].pool.conv.weight.grad.abs().sum() > 0
    assert backbone.stages[2].pool.fc.weight.grad.abs().sum() > 0
    assert backbone.pos_embed.weight.grad.abs().sum() > 0
    assert {'pos_embed.weight', 'prefix.cls'} <= backbone.no_weight_decay()


@pytest.mark.slow
def test_pit_s_size_and_cost_equal_timm_and_the_paper():
    ours = zoo.create_classifier('pit_s_224').eval()
    ref = timm.create_model('pit_s_224').eval().requires_grad_(False)
    assert count_params(ours) == count_params(ref)
    assert round(count_params(ours) / 1e6, 1) == 23.5
    x = torch.randn(1, 3, 224, 224)
    macs = count_macs(ours, x)
    assert abs(macs - count_macs(ref, x)) / macs <= 0.01
    assert round(macs / 1e9, 1) == 2.9


@pytest.mark.parametrize('name', ['pit_ti_224', 'pit_xs_distilled_224',
                                  pytest.param('pit_b_224', marks=pytest.mark.slow)])
def test_parameter_count_equals_timm(name):
    assert count_params(zoo.create_classifier(name)) == count_params(timm.create_model(name))
