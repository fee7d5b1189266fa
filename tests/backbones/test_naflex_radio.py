"""C-RADIO as NaFlex ViTs (zoo.backbones.naflex_radio): the registered names are timm's ``naflexvit_*_radio_*`` and
build timm's model (keys, shapes, parameter count, the 128 x 128 table and its resampling options; meta device);
reduced models (depth 2, width 96, perturbed weights: norms, LayerScale, table, tokens) give timm's logits, pooled
(summary token) features and tokens within 1e-4 for a batch of images of different sizes, against timm's model on
each image alone and on timm's own NaFlex batch, and on a 'b c h w' tensor at a non-square size; timm's file and
NVIDIA's layout load (the latter as timm's own filter loads it, and equal at 512 px to the :mod:`.radio` ViT
loading the same file); the backbone's per-image taps equal timm's intermediates; list_models reports timm's counts."""
import pytest
import torch

import zoo
from zoo.backbones.naflex_pos import GridPosEmbed
from zoo.weights.layout_error import CheckpointLayoutError
from zoo.weights.radio import radio_naflex_from_official
from zoo.weights.timm import FROM_TIMM

from ..reference import meta_pair, save_safetensors, timm_reference
from .test_naflex import assert_mixed_batch_equals_timm, images, padded

timm = pytest.importorskip('timm')
naflexvit = pytest.importorskip('timm.models.naflexvit')
NAMES = zoo.list_backbones('naflexvit_*_radio_*')
SMALL = dict(depth=2, embed_dim=96, num_heads=4)
# the two corner rules and prefix sizes: v3-B (align_corners, 1 + 7 tokens, LayerScale), v4-SO400M (neither, 1 + 9)
REDUCED = ['naflexvit_base_patch16_radio_v3', 'naflexvit_so400m_patch16_radio_v4']


def test_the_registered_names_are_timms_naflex_radio_names():
    assert NAMES == sorted(timm.list_models('naflexvit_*_radio_*')) and len(NAMES) == 6


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if 'huge' in n or 'giant' in n else n
                                  for n in NAMES])  # 1-2 s each on the meta device under load
def test_meta_build_has_timms_keys_shapes_parameter_count_and_table(name):
    ours, reference = meta_pair(name)
    want = {k: tuple(v.shape) for k, v in FROM_TIMM['naflex'](reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    assert ours.num_prefix_tokens == reference.num_prefix_tokens == (8 if '_v3' in name else 10)
    table, embeds = ours.pos_embed, reference.embeds
    assert isinstance(table, GridPosEmbed) and table.grid == (128, 128) == tuple(embeds.pos_embed.shape[1:3])
    assert (table.mode, table.antialias, table.ar_preserving, table.align_corners) == (
        embeds.pos_embed_interp_mode, embeds.pos_embed_antialias, embeds.pos_embed_ar_preserving,
        embeds.pos_embed_align_corners)
    assert isinstance(ours.norm, torch.nn.Identity) and ours.global_pool == 'token' and ours.num_classes == 0


def test_base_v3_parameter_count_is_the_vits_plus_the_whole_table():
    ours, _ = meta_pair('naflexvit_base_patch16_radio_v3')
    with torch.device('meta'):
        vit = zoo.create_classifier('vit_base_patch16_radio_v3')  # its table: 32 x 32
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in vit.parameters()) + (128 * 128 - 32 * 32) * 768 == 98_252_544


def reduced_pair(name, tmp_path, zero_patch_bias=False, **extra):
    """timm's perturbed reduced model (``zero_patch_bias``: as NVIDIA's, which has none) and ours loaded from its
    timm file."""
    kwargs = dict(SMALL, num_classes=0) | extra
    reference = timm_reference(name, **kwargs)
    if zero_patch_bias:
        with torch.no_grad():
            reference.embeds.proj.bias.zero_()
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    return zoo.create_classifier(name, pretrained=path, **kwargs).eval(), reference


@pytest.mark.parametrize('name', REDUCED)
def test_mixed_size_batch_equals_timm_per_image_and_on_its_naflex_batch(name, tmp_path):
    ours, reference = reduced_pair(name, tmp_path, num_classes=10)
    assert ours.blocks[0].norm1.weight.ne(1).any() and ours.pos_embed.weight.shape == (1, 128, 128, 96)
    if 'base' in name:
        assert ours.blocks[0].ls1.gamma.ne(1e-5).any()  # LayerScale perturbed
    features, got, packed_batch, packed = assert_mixed_batch_equals_timm(ours, reference)
    # the pooled feature is the summary token (the first prefix token) after the last block, no norm
    assert torch.equal(got[1], features.tokens[:, 0])
    # every token but the padding: the summary token, the registers and each image's patches
    # (ours packed to the longest image's 256 patches, timm's to the collator's 300)
    keys = torch.cat([features.valid.new_ones(4, ours.num_prefix_tokens), features.valid], dim=1)
    n = keys.shape[1]
    assert not packed_batch.valid[:, n - ours.num_prefix_tokens:].any()
    assert (features.tokens[keys] - packed['patches'][:, :n][keys]).abs().max() <= 1e-4


@pytest.mark.parametrize('size', [(80, 208), (512, 512)])
def test_a_tensor_batch_equals_timm_at_a_non_square_and_the_native_size(size, tmp_path):
    ours, reference = reduced_pair('naflexvit_base_patch16_radio_v3', tmp_path, num_classes=10)
    x = torch.randn(2, 3, *size)
    with torch.no_grad():
        assert (ours(x) - reference(x)).abs().max() <= 1e-4
        assert (ours.forward_features(x) - reference.forward_features(x)).abs().max() <= 1e-4


def to_nvidia(state: dict) -> dict:
    """timm's NaFlex RADIO keys -> NVIDIA's (the inverse of timm's RADIO filter); the patch bias must be zero."""
    assert not state['embeds.proj.bias'].any()
    p = 'radio_model.model.'
    patch, table = state['embeds.proj.weight'], state['embeds.pos_embed']
    side = round((patch.shape[1] // 3) ** 0.5)
    out = {f'{p}patch_generator.embedder.weight': patch.reshape(-1, side, side, 3).permute(0, 3, 1, 2).flatten(1),
           f'{p}patch_generator.pos_embed': table.flatten(1, 2),
           f'{p}patch_generator.cls_token.token': torch.cat([state['embeds.cls_token'][0],
                                                             state['embeds.reg_token'][0]]),
           f'{p}input_conditioner.norm_mean': torch.zeros(3, 1, 1)}  # left out, as timm leaves it out
    out.update({p + k.replace('.gamma', '.grandma'): v for k, v in state.items() if k.startswith('blocks.')})
    return out


def test_nvidias_layout_loads_as_timm_loads_it_and_as_the_radio_vit_at_512(tmp_path):
    name = 'naflexvit_base_patch16_radio_v3'
    _, reference = reduced_pair(name, tmp_path, zero_patch_bias=True)
    nvidia = to_nvidia(reference.state_dict())
    path = tmp_path / 'radio.pt'
    torch.save(nvidia, path)
    ours = zoo.create_classifier(name, pretrained=str(path), **SMALL).eval()
    timms = timm.create_model(name, pretrained=False, **SMALL).eval()
    timms.load_state_dict(naflexvit.checkpoint_filter_fn(nvidia, timms))
    vit = zoo.create_classifier('vit_base_patch16_radio_v3', pretrained=str(path), **SMALL).eval()
    batch = images([(96, 160), (512, 512)])
    with torch.no_grad():
        got = ours(batch)
        want = torch.cat([timms(x[None]) for x in batch])
        assert got.shape == (2, 96) and (got - want).abs().max() <= 1e-4
        # at 512 px the ViT's table (brought to 32 x 32 at loading) is what the NaFlex model reads from 128 x 128
        assert (vit(batch[1][None]) - got[1:]).abs().max() <= 1e-4


def test_a_non_square_nvidia_table_is_refused_naming_the_key():
    nvidia = to_nvidia(timm_reference('naflexvit_base_patch16_radio_v3', num_classes=0, depth=1, embed_dim=48,
                                      num_heads=2).state_dict() | {'embeds.proj.bias': torch.zeros(48)})
    nvidia['radio_model.model.patch_generator.pos_embed'] = torch.zeros(1, 12, 48)
    with pytest.raises(CheckpointLayoutError, match=r"patch_generator.pos_embed'.*square table.*\(1, 12, 48\)"):
        radio_naflex_from_official(nvidia)


def test_backbone_gives_each_image_its_maps_and_summary_tokens_equal_to_timms(tmp_path):
    name = 'naflexvit_so400m_patch16_radio_v4'
    reference = timm_reference(name, num_classes=0, **SMALL)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone(name, out_indices=(0, 1), pretrained=path, **SMALL).eval()
    batch = padded(images())
    with torch.no_grad():
        per_image = backbone.forward_taps(batch)
    assert [tuple(t.maps[1].shape) for t in per_image] == [(1, 96, 6, 10), (1, 96, 14, 8), (1, 96, 16, 16),
                                                           (1, 96, 5, 8)]
    for taps, x in zip(per_image, batch):
        with torch.no_grad():
            want = reference.forward_intermediates(x[None], indices=[0, 1], norm=False, return_prefix_tokens=True,
                                                   intermediates_only=True)
        for got, prefix, (spatial, tokens) in zip(taps.maps, taps.prefix, want):
            assert prefix.shape == tokens.shape == (1, 10, 96)
            assert (got - spatial).abs().max() <= 1e-4 and (prefix - tokens).abs().max() <= 1e-4


def test_list_models_reports_the_naflex_radio_names_with_timms_counts():
    import list_models
    rows = {r['name']: r for r in list_models.main(['naflexvit_*_radio_*'])}
    assert sorted(rows) == NAMES
    for name in ('naflexvit_base_patch16_radio_v3', 'naflexvit_so400m_patch16_radio_v4'):
        with torch.device('meta'):
            reference = timm.create_model(name, pretrained=False)
        assert rows[name]['classifier_params_M'] == round(sum(p.numel() for p in reference.parameters()) / 1e6, 2)
        assert rows[name]['family'] == 'naflex' and rows[name]['input'] == '512x512'
        assert rows[name]['out_strides'] == [16] * 4
    assert rows['naflexvit_base_patch16_radio_v3']['classifier_params_M'] == 98.25
