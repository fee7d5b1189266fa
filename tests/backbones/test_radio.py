"""C-RADIO backbones (zoo.backbones.radio): every registered name is one of timm's non-NaFlex ``vit_*_radio_*`` and
builds timm's model (keys, shapes, parameter count, on the meta device); reduced models give timm's pooled (summary
token) features and features from timm's perturbed weights at the native size and, through the cropped position
table, at non-square sizes, where timm's reference is its model built at that size and loaded by its own RADIO
converter (which crops the table once, at loading); NVIDIA's layout (written from timm's reading of it) loads to the
same model; the backbone's taps equal timm's intermediates at non-square sizes; the cropping rule is checked against
hand-worked numbers."""
import pytest
import torch

import zoo
from zoo.core import CroppedPosEmbed
from zoo.core.pos_embed import crop_grid_embed
from zoo.weights.radio import radio_from_official
from zoo.weights.timm import vit_from_timm

from ..reference import assert_classifier_equals_timm, meta_pair, save_safetensors, timm_reference

timm = pytest.importorskip('timm')
vision_transformer = pytest.importorskip('timm.models.vision_transformer')
NAMES = zoo.list_backbones('vit_*_radio_*')
BIG = ('huge', 'giant', 'so400m')
NARROW = dict(embed_dim=96, num_heads=4)
# timm's reference models at non-square sizes: each (h, w) in pixels, 16 px patches
NON_SQUARE = ((256, 384), (384, 208))


def test_the_registered_names_are_timms_non_naflex_radio_names():
    assert NAMES == sorted(timm.list_models('vit_*_radio_*')) and len(NAMES) == 6


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if any(b in n for b in BIG) else n
                                  for n in NAMES])  # ~1-3 s each on the meta device
def test_registered_options_build_timms_keys_shapes_and_parameter_count(name):
    ours, reference = meta_pair(name)
    want = {k: tuple(v.shape) for k, v in vit_from_timm(reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    assert ours.num_prefix_tokens == reference.num_prefix_tokens == (8 if '_v3' in name else 10)
    assert isinstance(ours.pos_embed, CroppedPosEmbed) and ours.pos_embed.grid == (32, 32)
    corners = any(n in name for n in vision_transformer._RADIO_ALIGN_CORNERS)
    assert ours.pos_embed.align_corners == corners
    assert isinstance(ours.norm, torch.nn.Identity) and ours.global_pool == 'token'


def to_nvidia(state: dict) -> dict:
    """timm's RADIO keys -> NVIDIA's (the inverse of timm's ``_convert_radio``); the patch bias must be zero."""
    assert not state['patch_embed.proj.bias'].any()
    p = 'radio_model.model.'
    out = {f'{p}patch_generator.embedder.weight': state['patch_embed.proj.weight'].flatten(1),
           f'{p}patch_generator.pos_embed': state['pos_embed'],
           f'{p}patch_generator.cls_token.token': torch.cat([state['cls_token'][0], state['reg_token'][0]]),
           f'{p}input_conditioner.norm_mean': torch.zeros(3, 1, 1)}  # left out, as timm leaves it out
    out.update({p + k.replace('.gamma', '.grandma'): v for k, v in state.items() if k.startswith('blocks.')})
    return out


def timm_at(name: str, size, nvidia: dict, **kwargs) -> torch.nn.Module:
    """timm's model of ``name`` built at ``size`` and loaded from NVIDIA's layout by timm's own filter."""
    model = timm.create_model(name, pretrained=False, img_size=size, **kwargs).eval()
    corners = any(n in name for n in vision_transformer._RADIO_ALIGN_CORNERS)
    model.load_state_dict(vision_transformer.checkpoint_filter_fn(
        nvidia, model, interpolation='bilinear', antialias=False, align_corners=corners))
    return model


def reference_pair(name: str, tmp_path, **kwargs):
    """timm's perturbed reduced model (zero patch bias: NVIDIA's has none) and ours loaded from its file."""
    reference = timm_reference(name, num_classes=0, **kwargs)
    with torch.no_grad():
        reference.patch_embed.proj.bias.zero_()
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    return reference, zoo.create_classifier(name, pretrained=path, **kwargs).eval()


@pytest.mark.parametrize('name,small', [('vit_base_patch16_radio_v3', NARROW),               # align_corners, LayerScale
                                        ('vit_so400m_patch16_radio_v4', NARROW)])          # no corners, 9 registers
def test_pooled_and_summary_features_equal_timm_at_native_and_non_square_sizes(name, small, tmp_path):
    reference, ours = reference_pair(name, tmp_path, depth=2, **small)
    assert ours.blocks[0].norm1.weight.ne(1).any()  # perturbed: the norms are exercised
    assert_classifier_equals_timm(ours, reference, [(512, 512)])
    nvidia = to_nvidia(reference.state_dict())
    for size in NON_SQUARE:
        cropped = timm_at(name, size, nvidia, depth=2, **small)
        assert_classifier_equals_timm(ours, cropped, [size])
        x = torch.randn(1, 3, *size)
        with torch.no_grad():  # the summary token: the pooled feature, and the first of the prefix tokens
            summary, want = ours.forward_features(x)[:, 0], cropped.forward_features(x)[:, 0]
            assert (summary - want).abs().max() <= 1e-4
            assert torch.equal(summary, ours.forward_head(ours.forward_features(x), pre_logits=True))


def test_nvidias_layout_with_a_larger_table_loads_as_timm_loads_it(tmp_path):
    name = 'vit_large_patch16_radio_v3'
    reference = timm_reference(name, num_classes=0, depth=2, **NARROW)
    with torch.no_grad():
        reference.patch_embed.proj.bias.zero_()
    nvidia = to_nvidia(reference.state_dict())
    nvidia['radio_model.model.patch_generator.pos_embed'] = torch.randn(1, 48 * 48, 96)  # RADIO's is 128 x 128
    path = tmp_path / 'radio.pt'
    torch.save(nvidia, path)
    ours = zoo.create_classifier(name, pretrained=str(path), depth=2, **NARROW).eval()
    assert_classifier_equals_timm(ours, timm_at(name, (512, 512), nvidia, depth=2, **NARROW), [(512, 512)])
    converted = radio_from_official(nvidia)
    assert 'input_conditioner.norm_mean' not in converted and not converted['patch_embed.proj.bias'].any()
    assert converted['prefix.registers'].shape == (1, 7, 96)


def test_a_file_in_another_layout_is_not_read_as_radio():
    with pytest.raises(zoo.weights.io.CheckpointError, match='radio_model.model.patch_generator.embedder.weight'):
        radio_from_official({'patch_embed.proj.weight': torch.zeros(1)})


def test_backbone_taps_equal_timms_intermediates_at_non_square_sizes(tmp_path):
    name = 'vit_base_patch16_radio_v3'
    reference = timm_reference(name, num_classes=0, depth=3, **NARROW)
    with torch.no_grad():
        reference.patch_embed.proj.bias.zero_()
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone(name, depth=3, out_indices=(0, 2), pretrained=path, **NARROW).eval()
    nvidia = to_nvidia(reference.state_dict())
    for size in NON_SQUARE:
        cropped = timm_at(name, size, nvidia, depth=3, **NARROW)
        x = torch.randn(1, 3, *size)
        with torch.no_grad():
            maps, prefix = backbone.forward_taps(x)
            want = cropped.forward_intermediates(x, indices=[0, 2], intermediates_only=True, norm=False)
        assert prefix[0].shape == (1, 8, 96)
        for got, spatial in zip(maps, want):
            assert got.shape == spatial.shape == (1, 96, size[0] // 16, size[1] // 16)
            assert (got - spatial).abs().max() <= 1e-4


def test_the_cropping_rule_by_hand():
    table = torch.arange(16.).reshape(1, 16, 1)  # a 4 x 4 table, row-major values 0..15
    # to a 2 x 1 grid: resampled to 2 x 2 (align_corners: rows / columns 0 and 3), the left column kept
    assert crop_grid_embed(table, (2, 1), (4, 4), align_corners=True).flatten().tolist() == [0., 12.]
    # without align_corners the 2 x 2 samples sit at 1.5 pixel centres: means of 2 x 2 blocks
    assert crop_grid_embed(table, (1, 2), (4, 4)).flatten().tolist() == [2.5, 4.5]
    # to 2 x 4: the 4 x 4 square of the larger side (the table itself), its top two rows
    assert torch.equal(crop_grid_embed(table, (2, 4), (4, 4)), table[:, :8])
    # a larger grid reads the table upsampled: 8 x 8, top-left 3 x 8
    up = crop_grid_embed(table, (3, 8), (4, 4), align_corners=True).reshape(3, 8)
    assert up[0, 0] == 0 and up[0, 7] == 3 and torch.allclose(up[1, 0], torch.tensor(4 * 3 / 7))


def test_list_models_reports_radio_names_with_timms_counts():
    import list_models
    names = ['vit_base_patch16_radio_v3', 'vit_so400m_patch16_radio_v4']
    rows = {r['name']: r for r in list_models.main(names)}
    for name in names:
        with torch.device('meta'):
            reference = timm.create_model(name, pretrained=False)
        count = round(sum(p.numel() for p in reference.parameters()) / 1e6, 2)
        assert rows[name]['classifier_params_M'] == count
        assert rows[name]['input'] == '512x512' and rows[name]['out_strides'] == [16] * 4
    assert rows['vit_base_patch16_radio_v3']['backbone_params_M'] == 86.46  # headless, its last block a tap
    assert rows['vit_so400m_patch16_radio_v4']['backbone_params_M'] == 367.83  # blocks after tap 23 of 27 dropped
