"""AIMv2 image encoders (zoo.backbones.aimv2): every registered name is one of timm's ``aimv2_*`` and builds timm's
model (keys, shapes, parameter count, on the meta device: the big ones never in real memory); reduced encoders
(RMSNorm everywhere and on the patch tokens, no biases, SwiGLU, no CLS token, the mean of the normed patch tokens)
give timm's logits, pooled features and features from timm's perturbed weights at the native size and a non-square
one; the backbone's taps equal timm's intermediates at non-square sizes; transformers' ``Aimv2VisionModel``
(its encoder; its attention-pooling head is neither timm's nor ours) loads and gives its last hidden state."""
import pytest
import torch

import zoo

from ..reference import (
    assert_classifier_equals_timm,
    meta_pair,
    meta_pair_with_timms_keys,
    perturb_,
    save_safetensors,
    timm_reference,
)

timm = pytest.importorskip('timm')
NAMES = zoo.list_backbones('aimv2_*')
SMALL = dict(depth=2, embed_dim=96, num_heads=4)  # every code path at a test's depth and width


def test_the_registered_names_are_timms_aimv2_names():
    assert NAMES == sorted(timm.list_models('aimv2_*')) and len(NAMES) == 12


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if 'large' not in n else n
                                  for n in NAMES])  # ~1 s each on the meta device
def test_registered_options_build_timms_keys_shapes_and_parameter_count(name):
    ours, reference = meta_pair_with_timms_keys(name)
    block = ours.blocks[0]
    assert isinstance(block.norm1, torch.nn.RMSNorm) and block.norm1.eps == 1e-5
    assert isinstance(ours.patch_embed.norm, torch.nn.RMSNorm) and isinstance(ours.norm, torch.nn.RMSNorm)
    assert block.attn.proj.bias is None and block.mlp.fc1.bias is None and block.mlp.fc2.bias is None
    assert block.mlp.gated and ours.num_prefix_tokens == 0 and ours.global_pool == 'avg'


def test_the_large_count_is_timms():
    ours, reference = meta_pair('aimv2_large_patch14_224')
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters()) == 309_197_824


@pytest.mark.parametrize('name,size', [('aimv2_large_patch14_224', (98, 182)), ('aimv2_huge_patch14_336', (182, 70))])
def test_logits_and_pooled_features_equal_timm(name, size, tmp_path):
    native = timm.models.get_pretrained_cfg(name).input_size[1:]
    reference = timm_reference(name, num_classes=10, dynamic_img_size=True, **SMALL)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, num_classes=10, pretrained=path, **SMALL).eval()
    assert ours.blocks[0].norm1.weight.ne(1).any() and ours.patch_embed.norm.weight.ne(1).any()  # perturbed norms
    assert_classifier_equals_timm(ours, reference, (native, size))


def test_backbone_taps_equal_timms_intermediates_at_non_square_sizes(tmp_path):
    small = dict(SMALL, depth=3)
    reference = timm_reference('aimv2_large_patch14_224', num_classes=0, dynamic_img_size=True, **small)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone('aimv2_large_patch14_224', out_indices=(0, 2), pretrained=path, **small).eval()
    for hw in ((56, 98), (126, 70)):
        x = torch.randn(1, 3, *hw)
        with torch.no_grad():
            maps, prefix = backbone.forward_taps(x)
            want = reference.forward_intermediates(x, indices=[0, 2], intermediates_only=True, norm=False)
        assert prefix is None
        for got, spatial in zip(maps, want):
            assert got.shape == spatial.shape == (1, 96, hw[0] // 14, hw[1] // 14)
            assert (got - spatial).abs().max() <= 1e-4


def test_transformers_aimv2_vision_model_loads_and_gives_its_last_hidden_state(tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.Aimv2VisionConfig(hidden_size=96, intermediate_size=264, num_hidden_layers=2,
                                            num_attention_heads=4, image_size=56, patch_size=14)
    reference = perturb_(transformers.Aimv2VisionModel(config)).eval()
    reference.save_pretrained(tmp_path)
    ours = zoo.create_classifier('aimv2_large_patch14_224', img_size=56, mlp_ratio=2.75, pretrained=str(tmp_path),
                                 **SMALL).eval()
    assert ours.patch_embed.norm.weight.ne(1).any()
    x = torch.randn(2, 3, 56, 56)
    with torch.no_grad():
        want = reference(pixel_values=x).last_hidden_state
        got = ours.forward_features(x)
    assert got.shape == want.shape == (2, 16, 96) and (got - want).abs().max() <= 1e-4
    assert torch.allclose(ours(x), want.mean(1), atol=1e-4)  # headless: the mean of the normed patch tokens


def test_list_models_reports_aimv2_names_with_timms_counts():
    import list_models
    names = ['aimv2_large_patch14_224', 'aimv2_3b_patch14_448']  # the smallest and the largest, on the meta device
    rows = {r['name']: r for r in list_models.main(names)}
    for name in names:
        with torch.device('meta'):
            reference = timm.create_model(name, pretrained=False)
        assert rows[name]['classifier_params_M'] == round(sum(p.numel() for p in reference.parameters()) / 1e6, 2)
        assert rows[name]['family'] == 'vit' and rows[name]['out_strides'] == [14] * 4
    assert rows['aimv2_large_patch14_224']['classifier_params_M'] == 309.2
    widest = rows['aimv2_3b_patch14_448']
    assert widest['input'] == '448x448' and widest['out_channels'] == [3072] * 4


def test_a_damaged_transformers_file_names_the_key_and_the_fix():
    from zoo.weights import CheckpointLayoutError
    from zoo.weights.aimv2 import aimv2_from_hf
    transformers = pytest.importorskip('transformers')
    config = transformers.Aimv2VisionConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                            num_attention_heads=2, image_size=28, patch_size=14)
    state = transformers.Aimv2VisionModel(config).state_dict()
    assert aimv2_from_hf(state)['blocks.0.mlp.fc1.weight'].shape == (96, 32)  # [gate | up]
    missing = {k: v for k, v in state.items() if k != 'encoder.layers.0.ffn.up_proj.weight'}
    with pytest.raises(CheckpointLayoutError, match=r"key 'encoder\.layers\.0\.ffn\.up_proj\.weight': missing.*"
                                                    r"save_pretrained"):
        aimv2_from_hf(missing)
    flat = dict(state, **{'embeddings.position_embedding.weight': state['embeddings.position_embedding.weight'][0]})
    with pytest.raises(CheckpointLayoutError, match=r"key 'embeddings\.position_embedding\.weight'"):
        aimv2_from_hf(flat)


def test_an_unknown_norm_kind_is_named():
    with pytest.raises(ValueError, match=r"norm must be one of 'layer', 'rms', got 'batch'"):
        zoo.create_backbone('aimv2_large_patch14_224', depth=1, embed_dim=32, num_heads=2, norm='batch')
