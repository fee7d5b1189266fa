"""InternViT-300M (zoo.backbones.internvit): the registered name is timm's ``vit_intern300m_patch14_448`` and builds
timm's model (keys, shapes, parameter count, LayerScale init, no final norm; on the meta device); a reduced-depth
tower, built through the same variant with the same overrides as timm's, gives timm's pooled class token and features
from timm's perturbed weights (LayerScale and norms perturbed) at 448 px and at a non-square size; timm's file loads
into the backbone, whose taps are timm's intermediates."""
import pytest
import torch
from torch import nn

import zoo
from zoo.weights.timm import vit_from_timm

from ..reference import assert_classifier_equals_timm, meta_pair, save_safetensors, timm_reference

timm = pytest.importorskip('timm')
NAME = 'vit_intern300m_patch14_448'
REDUCED = dict(depth=3, embed_dim=128, num_heads=4)  # the only InternViT: the 300M tower at reduced depth and width


def test_the_registered_name_is_timms_only_internvit():
    assert zoo.list_backbones('*intern*') == timm.list_models('*intern*') == [NAME]


def test_meta_build_has_timms_keys_shapes_parameter_count_and_layer_scale():
    ours, reference = meta_pair(NAME)
    want = {k: tuple(v.shape) for k, v in vit_from_timm(reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in reference.parameters()) == 304_012_288
    assert isinstance(ours.norm, nn.Identity) and isinstance(ours.fc_norm, nn.Identity)  # no final norm
    assert ours.num_prefix_tokens == 1 and ours.global_pool == 'token' and ours.patch_size == 14
    with torch.device('cpu'):
        small = zoo.create_classifier(NAME, **REDUCED)
    assert torch.equal(small.blocks[0].ls1.gamma, torch.full((128,), 0.1))


def test_reduced_tower_equals_timm_at_448_and_a_non_square_size(tmp_path):
    reference = timm_reference(NAME, num_classes=10, **REDUCED)  # dynamic_img_size: timm's variant sets it
    assert reference.blocks[0].ls1.gamma.ne(0.1).all()  # perturbed: LayerScale and norms exercised
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(NAME, num_classes=10, pretrained=path, **REDUCED).eval()
    assert_classifier_equals_timm(ours, reference, ((448, 448), (182, 308)))


def test_timms_file_loads_into_the_backbone_whose_taps_are_timms_intermediates(tmp_path):
    reference = timm_reference(NAME, num_classes=0, **REDUCED)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone(NAME, out_indices=(0, 2), pretrained=path, **REDUCED).eval()
    x = torch.randn(1, 3, 126, 70)
    with torch.no_grad():
        got, prefix = backbone.forward_taps(x)
        want = reference.forward_intermediates(x, indices=[0, 2], intermediates_only=True, norm=False)
    assert [tuple(m.shape) for m in got] == [(1, 128, 9, 5)] * 2 and prefix[0].shape == (1, 1, 128)
    assert all((g - w).abs().max() <= 1e-4 for g, w in zip(got, want))


def test_list_models_reports_internvit_with_timms_count():
    import list_models
    (row,) = list_models.main([NAME])
    assert row['classifier_params_M'] == 304.01 and row['family'] == 'vit' and row['input'] == '448x448'
    assert row['out_channels'] == [1024] * 4 and row['out_strides'] == [14] * 4
