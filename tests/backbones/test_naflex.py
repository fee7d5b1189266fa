"""NaFlex ViTs (zoo.backbones.naflex): every registered name is one of timm's ``naflexvit_*`` and builds
timm's model (keys, shapes, parameter count; meta device); reduced models (depth 2, width 96, perturbed weights: norms,
LayerScale, tables, tokens) give timm's logits and pooled features within 1e-4 for a batch of images of different
sizes and aspect ratios, against timm's model on each image alone and on timm's own NaFlex batch (patches, coords,
valid); ``patchify`` gives the batch timm's Patchify + NaFlexCollator give; the padding is masked (its values change
nothing; without the mask they would); ``budget_size`` is timm's size for a patch budget; the backbone gives each image
its maps on its own grid, equal to timm's intermediates of that image alone; timm's files load."""
import pytest
import torch

import zoo
from zoo.backbones.naflex import NaFlexTokens
from zoo.backbones.naflex_batch import NaFlexBatch, budget_size, fit_to_budget, patchify
from zoo.backbones.naflex_pos import FactorizedPosEmbed, GridPosEmbed
from zoo.weights.timm import FROM_TIMM

from ..reference import meta_pair, save_safetensors, timm_reference

timm = pytest.importorskip('timm')
naflex_data = pytest.importorskip('timm.data.naflex_dataset')
naflex_transforms = pytest.importorskip('timm.data.naflex_transforms')
#: C-RADIO's NaFlex names (zoo.backbones.naflex_radio): tested in test_naflex_radio.py
RADIO = zoo.list_backbones('naflexvit_*_radio_*')
NAMES = [n for n in zoo.list_backbones('naflexvit_*') if n not in RADIO]
SMALL = dict(depth=2, embed_dim=96, num_heads=4)
# mixed sizes (h, w) in pixels: wide, tall, square at the table's own 16 x 16 grid, one not tiled by 16 px patches
MIXED = [(96, 160), (224, 128), (256, 256), (72, 120)]


def images(sizes=MIXED, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(3, *hw, generator=generator) for hw in sizes]


def test_the_registered_names_are_timms_naflex_vits():
    assert sorted(NAMES + RADIO) == sorted(timm.list_models('naflexvit_*')) and len(NAMES) == 8 and len(RADIO) == 6


@pytest.mark.parametrize('name', NAMES)
def test_meta_build_has_timms_keys_shapes_and_parameter_count(name):
    ours, reference = meta_pair(name)
    want = {k: tuple(v.shape) for k, v in FROM_TIMM['naflex'](reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    assert ours.num_prefix_tokens == reference.num_prefix_tokens
    table = ours.pos_embed
    assert isinstance(table, FactorizedPosEmbed if 'parfac' in name else GridPosEmbed) and table.grid == (16, 16)
    assert table.ar_preserving == ('_par' in name)
    assert getattr(table, 'mode', 'bilinear' if 'siglip' in name else 'bicubic') == \
        ('bilinear' if 'siglip' in name else 'bicubic')


def test_base_siglip_parameter_count():
    ours, _ = meta_pair('naflexvit_base_patch16_siglip')
    assert sum(p.numel() for p in ours.parameters()) == 92_930_304


def reduced_pair(name, tmp_path, **extra):
    size = SMALL if 'so150m2' not in name else dict(depth=2, embed_dim=104)  # so150m2: 13 heads of 8, MLP 34/13
    kwargs = dict(size, num_classes=10, **extra)
    reference = timm_reference(name, **kwargs)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, pretrained=path, **kwargs).eval()
    return ours, reference


@pytest.mark.parametrize('name', NAMES)
def test_mixed_size_batch_equals_timm_per_image_and_on_its_naflex_batch(name, tmp_path):
    if 'so400m' in name:
        pytest.skip('the base SigLIP tower covers the same options (only the sizes differ; counts checked on meta)')
    ours, reference = reduced_pair(name, tmp_path)
    assert ours.blocks[0].norm1.weight.ne(1).any() and ours.pos_embed.state_dict()  # perturbed, loaded
    assert_mixed_batch_equals_timm(ours, reference)


def assert_mixed_batch_equals_timm(ours, reference):
    """Logits and pooled features of the four :func:`images` as one batch of ours within 1e-4 of timm's model on
    each image alone and on timm's packed NaFlex batch; returns our features, (logits, pooled), timm's packed batch
    and its forward_features."""
    batch = images()
    timm_batch = patchify(batch, 16, max_seq_len=300)
    with torch.no_grad():
        features = ours.forward_features(batch)
        got = (ours.forward_head(features), ours.forward_head(features, pre_logits=True))
        alone = [(reference(x[None]), reference.forward_head(reference.forward_features(x[None]), pre_logits=True))
                 for x in padded(batch)]
        packed = reference.forward_features(timm_batch.patches, patch_coord=timm_batch.coords,
                                            patch_valid=timm_batch.valid)
        want_packed = (reference.forward_head(**packed), reference.forward_head(**packed, pre_logits=True))
    assert isinstance(features, NaFlexTokens) and features.grids == ((6, 10), (14, 8), (16, 16), (5, 8))
    for g, w in zip(got, zip(*alone)):
        assert g.shape == (4, w[0].shape[1]) and (g - torch.cat(w)).abs().max() <= 1e-4
    for g, w in zip(got, want_packed):
        assert (g - w).abs().max() <= 1e-4
    return features, got, timm_batch, packed


def padded(batch):
    """Each image zero-padded at its end to a multiple of 16 px (timm's model takes tiled images alone)."""
    return [torch.nn.functional.pad(x, (0, -x.shape[2] % 16, 0, -x.shape[1] % 16)) for x in batch]


def test_a_tensor_batch_is_a_plain_vit_with_the_resampled_table(tmp_path):
    ours, reference = reduced_pair('naflexvit_base_patch16_par_gap', tmp_path)
    x = torch.randn(2, 3, 80, 208)
    with torch.no_grad():
        assert (ours(x) - reference(x)).abs().max() <= 1e-4
        assert (ours.forward_features(x) - reference.forward_features(x)).abs().max() <= 1e-4


def test_patchify_is_timms_patchify_and_collator():
    batch = images()
    samples = [(naflex_transforms.Patchify(16)(x), 0) for x in batch]
    want, _ = naflex_data.NaFlexCollator(max_seq_len=300)(samples)
    got = patchify(batch, 16, max_seq_len=300)
    assert torch.equal(got.patches, want['patches']) and torch.equal(got.coords, want['patch_coord'])
    assert torch.equal(got.valid, want['patch_valid']) and got.grids == ((6, 10), (14, 8), (16, 16), (5, 8))
    again = NaFlexBatch.from_tensors(want['patches'], want['patch_coord'], want['patch_valid'])
    assert again.grids == got.grids


def test_the_padding_is_masked_in_attention_and_pooling(tmp_path):
    for name in ('naflexvit_base_patch16_map', 'naflexvit_base_patch16_gap'):
        ours, _ = reduced_pair(name, tmp_path)
        batch = patchify(images(), 16, max_seq_len=300)
        noisy = NaFlexBatch(batch.patches + 100 * (~batch.valid)[..., None] * torch.randn_like(batch.patches),
                            batch.coords, batch.valid, batch.grids)
        unmasked = NaFlexBatch(noisy.patches, batch.coords, torch.ones_like(batch.valid), batch.grids)
        with torch.no_grad():
            clean, dirty, leaky = ours(batch), ours(noisy), ours(unmasked)
        assert (clean - dirty).abs().max() <= 1e-5  # the padding's values change nothing
        assert (clean - leaky).abs().max() > 1e-2  # they would without the mask: the test can fail


def test_budget_size_is_timms_size_for_a_sequence_length():
    for hw in [(480, 640), (1000, 200), (33, 77), (224, 224), (16, 4000)]:
        for budget in (64, 256, 729):
            _, want = naflex_transforms.get_image_size_for_seq(hw, 16, budget)
            assert budget_size(hw, 16, budget) == tuple(want), (hw, budget)
            assert want[0] // 16 * want[1] // 16 <= budget
    image = fit_to_budget(torch.randn(3, 480, 640), 16, 256)
    assert image.shape == (3, 224, 288)  # 14 x 18 = 252 patches: 15 x 18 and 14 x 19 pass 256


def test_an_image_over_the_budget_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r'image 1 of size \(256, 256\) has 256 patches .* over the budget '
                                         r'max_seq_len=100; resize it first .*fit_to_budget'):
        patchify(images([(64, 64), (256, 256)]), 16, max_seq_len=100)


def test_backbone_gives_each_image_its_maps_on_its_own_grid_equal_to_timms(tmp_path):
    name = 'naflexvit_base_patch16_gap'
    reference = timm_reference(name, num_classes=0, **SMALL)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone(name, out_indices=(0, 1), pretrained=path, **SMALL).eval()
    batch = padded(images())
    with torch.no_grad():
        per_image = backbone.forward_taps(batch)
        maps = backbone(batch)
    assert [tuple(t.maps[0].shape) for t in per_image] == [(1, 96, 6, 10), (1, 96, 14, 8), (1, 96, 16, 16),
                                                           (1, 96, 5, 8)]
    assert [m[1].shape for m in maps] == [t.maps[1].shape for t in per_image]
    for taps, x in zip(per_image, batch):
        with torch.no_grad():
            want = reference.forward_intermediates(x[None], indices=[0, 1], intermediates_only=True, norm=False)
            alone = backbone.forward_taps(x[None])
        assert taps.prefix[0].shape == (1, 4, 96)
        for got, w, a in zip(taps.maps, want, alone.maps):
            assert (got - w).abs().max() <= 1e-4 and (got - a).abs().max() <= 1e-4


def test_timms_file_loads_by_format_auto(tmp_path):
    reference = timm_reference('naflexvit_base_patch16_siglip', num_classes=0, **SMALL)
    report = zoo.load_pretrained(ours := zoo.create_classifier('naflexvit_base_patch16_siglip', **SMALL),
                                 save_safetensors(reference, tmp_path / 'w.safetensors'))
    assert report.format == 'timm' and not (report.missing or report.unexpected)
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        assert (ours.eval()(x) - reference(x)).abs().max() <= 1e-4


def test_list_models_reports_naflex_names_with_timms_counts():
    import list_models
    rows = {r['name']: r for r in list_models.main(NAMES)}
    assert sorted(rows) == NAMES
    for name in ('naflexvit_base_patch16_siglip', 'naflexvit_base_patch16_parfac_gap'):
        with torch.device('meta'):
            reference = timm.create_model(name, pretrained=False)
        assert rows[name]['classifier_params_M'] == round(sum(p.numel() for p in reference.parameters()) / 1e6, 2)
        assert rows[name]['family'] == 'naflex' and rows[name]['out_strides'] == [16] * 4
    assert rows['naflexvit_so400m_patch16_siglip']['out_channels'] == [1152] * 4
