"""CrossViT against timm: logits at 240, timm's and the official key layouts, per-branch dense features, size and cost,
and inputs timm rejects (other sizes, non-square)."""
import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.profiling import count_macs, count_params

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')


@pytest.mark.parametrize('name', [pytest.param('crossvit_small_240', marks=pytest.mark.slow),
                                  'crossvit_9_240', 'crossvit_9_dagger_240',
                                  'crossvit_tiny_240'])
def test_logits_match_timm_at_240(name, tmp_path):
    torch.manual_seed(0)
    ref = timm_reference(name)
    ours = zoo.create_classifier(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    x = torch.randn(2, 3, 240, 240)
    with torch.no_grad():
        diff = (ours(x) - ref(x)).abs().max().item()
    assert diff <= 1e-4, f"{name}: max abs diff {diff}"


def test_official_layout_loads_to_the_same_logits(tmp_path):
    """IBM/CrossViT keeps the per-branch tables in ParameterLists: pos_embed.0, cls_token.1, ..."""
    torch.manual_seed(0)
    ref = timm_reference('crossvit_9_240')
    official = {k.replace('pos_embed_', 'pos_embed.').replace('cls_token_', 'cls_token.'): v
                for k, v in ref.state_dict().items()}
    assert 'pos_embed.0' in official and 'cls_token.1' in official
    torch.save({'model': official}, tmp_path / 'crossvit_9_official.pth')
    ours = zoo.create_classifier('crossvit_9_240')
    report = zoo.load_pretrained(ours, tmp_path / 'crossvit_9_official.pth')
    assert report.format in ('official', 'timm')
    x = torch.randn(1, 3, 240, 240)
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(x), ref(x), atol=1e-4, rtol=1e-4)


def test_backbone_levels_concatenate_both_branches_on_the_stride_16_grid(tmp_path):
    """Both branch maps are resampled onto the input / 16 grid (15x15 at 240: the small-patch branch's 20x20 and
    the large-patch branch's 14x14, which sees the input scaled by 224/240), so out_strides 16 is true."""
    torch.manual_seed(0)
    ref = timm_reference('crossvit_9_240')
    backbone = zoo.create_backbone('crossvit_9_240', pretrained=save_safetensors(ref, tmp_path / 'w.safetensors'))
    backbone.eval()
    assert backbone.out_channels == [384] * 4 and backbone.out_strides == [16] * 4
    assert backbone.prefix_names == ['cls']
    x = torch.randn(1, 3, 240, 240)
    with torch.no_grad():
        maps, prefixes = backbone.forward_taps(x)
        small, large = ref.forward_intermediates(x, intermediates_only=True)[:3], \
            ref.forward_intermediates(x, intermediates_only=True)[3:]
    resample = lambda m: F.interpolate(m, size=(15, 15), mode='bilinear', align_corners=False,  # noqa: E731
                                       antialias=True)
    for level, block in enumerate((0, 1, 2, 2)):
        assert maps[level].shape == (1, 384, 15, 15)
        torch.testing.assert_close(maps[level][:, :128], resample(small[block]), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(maps[level][:, 128:], resample(large[block]), atol=1e-4, rtol=1e-4)
        assert prefixes[level].shape == (1, 1, 384)


def test_any_size_and_non_square_inputs_resample_each_branch_table():
    model = zoo.create_classifier('crossvit_9_240', depths=((1, 1, 0),)).eval()
    backbone = zoo.create_backbone('crossvit_9_240', depths=((1, 1, 0),) * 2, out_indices=(0, 1)).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 320, 256)).shape == (1, 1000)
        maps = backbone(torch.randn(1, 3, 512, 384))
    # branch 0: 512/12 -> 43 rows, 384/12 = 32 columns; branch 1: 512*224/240/16 -> 30, 384*224/240/16 -> 22;
    # the backbone's maps: both resampled to 512/16 x 384/16
    assert [m.shape for m in maps] == [(1, 384, 32, 24)] * 2
    assert [b.grid((512, 384)) for b in backbone.branches] == [(43, 32), (30, 22)]


def test_dense_backbone_trains_both_branches():
    backbone = zoo.create_backbone('crossvit_tiny_240', depths=((1, 1, 0),) * 2, out_indices=(0, 1))
    maps, prefixes = backbone.forward_taps(torch.randn(2, 3, 96, 128))
    (sum(m.mean() for m in maps) + sum(p.mean() for p in prefixes)).backward()
    for i in range(2):
        assert backbone.branches[i].patch_embed.proj.weight.grad.abs().sum() > 0
        assert backbone.blocks[1].fusion[i].attn.qkv.q.weight.grad.abs().sum() > 0


@pytest.mark.slow
def test_crossvit_small_size_and_cost_are_the_published_ones():
    ours = zoo.create_classifier('crossvit_small_240').eval()
    ref = timm.create_model('crossvit_small_240').eval()
    assert count_params(ours) == count_params(ref)
    assert round(count_params(ours) / 1e6, 1) == 26.9  # the paper's table / timm's card
    x = torch.randn(1, 3, 240, 240)
    macs = count_macs(ours, x)
    assert macs == count_macs(ref, x)
    assert abs(macs / 1e9 - 5.63) / 5.63 < 0.01


@pytest.mark.parametrize('name', ['crossvit_tiny_240', pytest.param('crossvit_base_240', marks=pytest.mark.slow),
                                  'crossvit_15_240', 'crossvit_18_240', 'crossvit_15_dagger_240',
                                  pytest.param('crossvit_18_dagger_240', marks=pytest.mark.slow),
                                  'crossvit_15_dagger_408'])
def test_parameter_count_equals_timm(name):
    assert count_params(zoo.create_classifier(name)) == count_params(timm.create_model(name))
