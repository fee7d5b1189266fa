"""DINOv3 ViTs (zoo.backbones.dinov3): the registered names are timm's; every one builds timm's keys and shapes and
parameter count (on the meta device, the 7B included); reduced-depth models without biases and with q/v biases and
SwiGLU give timm's logits, pooled and token features at the native size and a non-square one, with LayerScale and
norms far from their init so that the attention's rotary positions matter; the RoPE part's coordinates, periods and
train-time augmentation follow transformers' and timm's formulas, and it is off in evaluation; the backbone taps
non-square inputs as timm's forward_intermediates; transformers' DINOv3ViTModel folders and official-layout
checkpoints load and give their outputs."""
import math
import re

import pytest
import torch

import zoo
from zoo.core.rope import DINOv3Rope, centred_coords
from zoo.weights import CheckpointLayoutError
from zoo.weights.dinov3 import dinov3_from_timm

from ..reference import assert_classifier_equals_timm, meta_pair, perturb_, save_safetensors

timm = pytest.importorskip('timm')
NAMES = zoo.list_backbones('vit_*_dinov3*')
SMALLEST = 'vit_small_patch16_dinov3'           # no q/k/v biases, plain MLP
SMALLEST_QKVB = 'vit_small_plus_patch16_dinov3_qkvb'  # q/v biases and SwiGLU
BIG = re.compile(r'_(large|huge_plus|7b)_')  # ~1 s each to build timm's on the meta device: the full suite's


def strong_reference(name: str, **kwargs) -> torch.nn.Module:
    """timm's model with noisy weights and LayerScale near 1 (its init 1e-5 would hide the attention)."""
    torch.manual_seed(0)
    model = perturb_(timm.create_model(name, pretrained=False, **kwargs), std=0.1)
    with torch.no_grad():
        for key, p in model.named_parameters():
            if key.endswith(('gamma_1', 'gamma_2')):
                p.uniform_(0.5, 1.5)
    return model.eval()


def test_the_registered_names_are_timms_dinov3_vits():
    assert NAMES == sorted(timm.list_models('*dinov3*')) and len(NAMES) == 12


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if BIG.search(n) else n for n in NAMES])
def test_every_name_builds_timms_keys_shapes_and_parameter_count(name):
    ours, reference = meta_pair(name)
    want = {k: tuple(v.shape) for k, v in dinov3_from_timm(reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    assert ours.num_prefix_tokens == 5 and isinstance(ours.pos_embed, type(None))
    assert ours.blocks[0].norm1.eps == ours.norm.eps == 1e-5 and isinstance(ours.blocks[0].attn.rope, DINOv3Rope)


def test_full_size_parameter_counts_equal_timms_figures():
    counts = {}
    for name in ('vit_small_patch16_dinov3', 'vit_7b_patch16_dinov3'):
        ours, reference = meta_pair(name)
        counts[name] = sum(p.numel() for p in ours.parameters())
        assert counts[name] == sum(p.numel() for p in reference.parameters())
    # by hand, S/16: patch embedding 384 * 3 * 256 + 384, 5 prefix tokens, 12 blocks of (4 norms' 1536, qkv without
    # bias 384 * 1152, proj 384 * 384 + 384, LayerScale 768, MLP 384 * 1536 + 1536 + 1536 * 384 + 384), final norm 768
    block = 1536 + 384 * 1152 + 384 * 385 + 768 + 384 * 1536 + 1536 + 1536 * 384 + 384
    assert counts['vit_small_patch16_dinov3'] == 384 * 3 * 256 + 384 + 5 * 384 + 12 * block + 768 == 21_586_944
    assert counts['vit_7b_patch16_dinov3'] == 6_716_030_976  # DINOv3 7B: 6.7 B


def test_list_models_gives_the_official_parameter_counts():
    """tools/list_models.py's rows: the sizes facebookresearch/dinov3's README lists (21M, 29M, 86M, 300M, 840M,
    6,716M), within its rounding (1 M, or 303 M -> '300M')."""
    import list_models
    rows = {r['name']: r for r in list_models.main(['vit_*_dinov3'])}
    readme = {'small': 21, 'small_plus': 29, 'base': 86, 'large': 300, 'huge_plus': 840, '7b': 6716}
    assert sorted(rows) == sorted(f'vit_{size}_patch16_dinov3' for size in readme)
    for size, params in readme.items():
        row = rows[f'vit_{size}_patch16_dinov3']
        assert row['family'] == 'dinov3' and row['input'] == '256x256' and row['out_strides'] == [16] * 4
        assert abs(row['classifier_params_M'] - params) < max(1.0, 0.012 * params), size  # 21.59 -> '21M'


@pytest.mark.parametrize('name', [SMALLEST, SMALLEST_QKVB])
def test_logits_and_pooled_features_equal_timm(name, tmp_path):
    reference = strong_reference(name, depth=2, num_classes=10)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, depth=2, num_classes=10, pretrained=path).eval()
    assert ours.blocks[0].ls1.gamma.min() > 0.4 and ours.blocks[0].norm1.weight.ne(1).any()
    assert_classifier_equals_timm(ours, reference, ((256, 256), (160, 96)))
    # the official pooled feature, the CLS token: timm's global_pool='token'
    token = zoo.create_classifier(name, depth=2, num_classes=10, pretrained=path, global_pool='token').eval()
    reference.global_pool = 'token'
    assert_classifier_equals_timm(token, reference, ((96, 128),))


def test_other_rope_periods_change_the_output():
    """The parity above is sensitive to the rotary positions: another base or normalisation moves the logits."""
    reference = strong_reference(SMALLEST, depth=2, num_classes=10)
    x = torch.randn(2, 3, 160, 96)
    for rope in (dict(kind='dinov3', base=10.0), dict(kind='dinov3', base=100.0, normalize='max')):
        ours = zoo.create_classifier(SMALLEST, depth=2, num_classes=10, rope=rope).eval()
        zoo.load_pretrained(ours, reference.state_dict())
        with torch.no_grad():
            assert (ours(x) - reference(x)).abs().max() > 1e-2


@pytest.mark.parametrize('normalize', ['separate', 'min', 'max'])
def test_rope_angles_follow_timms_dinov3_rope(normalize):
    from timm.layers.pos_embed_sincos import RotaryEmbeddingDinoV3
    for periods in (dict(base=100.0), dict(base=None, min_period=0.5, max_period=40.0)):
        ours = DINOv3Rope(32, normalize=normalize, **periods).eval()
        theirs = RotaryEmbeddingDinoV3(32, temperature=periods['base'], min_period=periods.get('min_period'),
                                       max_period=periods.get('max_period'), normalize_coords=normalize).eval()
        embed = theirs.get_embed((5, 3))  # (h w) [sin (d) | cos (d)], rotate-half layout [a | a]
        angles = ours.angles((5, 3), 'cpu')[0]
        assert torch.allclose(embed[:, :32], torch.cat([angles, angles], -1).sin(), atol=1e-6)
        assert torch.allclose(embed[:, 32:], torch.cat([angles, angles], -1).cos(), atol=1e-6)


def test_rope_rotates_half_pairs_and_leaves_the_prefix_tokens():
    rope = DINOv3Rope(8).eval()
    q, k = torch.randn(2, 1, 3 + 6, 8), torch.randn(2, 1, 3 + 6, 8)
    tq, tk = rope(q, k, (2, 3))
    assert torch.equal(tq[..., :3, :], q[..., :3, :]) and torch.equal(tk[..., :3, :], k[..., :3, :])
    y, x = centred_coords((2, 3))
    assert torch.allclose(y, torch.tensor([-0.5, -0.5, -0.5, 0.5, 0.5, 0.5]))
    assert torch.allclose(x, torch.tensor([-2 / 3, 0.0, 2 / 3] * 2))
    # token 5 (row 1, column 2): channel 0 pairs with 4 (angle 2 pi y / 1), channel 3 with 7 (2 pi x / 100 ** 0.5)
    for c, angle in ((0, 2 * math.pi * 0.5), (3, 2 * math.pi * (2 / 3) / 10.0)):
        a, b = q[..., 3 + 5, c], q[..., 3 + 5, c + 4]
        assert torch.allclose(tq[..., 3 + 5, c], a * math.cos(angle) - b * math.sin(angle), atol=1e-6)
        assert torch.allclose(tq[..., 3 + 5, c + 4], b * math.cos(angle) + a * math.sin(angle), atol=1e-6)


def test_train_time_augmentation_is_transformers_draw_and_off_in_eval():
    from transformers.models.dinov3_vit.modeling_dinov3_vit import (
        augment_patches_center_coordinates,
        get_patches_center_coordinates,
    )
    rope = DINOv3Rope(16, shift=0.1, jitter=1.5, rescale=2.0)
    plain = get_patches_center_coordinates(4, 6, torch.float32, torch.device('cpu'))
    torch.manual_seed(3)
    got = rope.train().coords((4, 6))
    torch.manual_seed(3)
    want = augment_patches_center_coordinates(plain, shift=0.1, jitter=1.5, rescale=2.0)
    assert torch.allclose(got, want, atol=1e-6) and not torch.allclose(got, plain, atol=1e-3)
    assert torch.equal(rope.eval().coords((4, 6)), plain)
    with pytest.raises(ValueError, match='either base'):
        DINOv3Rope(16, base=100.0, min_period=1.0, max_period=10.0)


def test_backbone_taps_non_square_inputs_as_timms_intermediates(tmp_path):
    reference = strong_reference(SMALLEST_QKVB, depth=4, num_classes=0)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone(SMALLEST_QKVB, depth=4, out_indices=(1, 3), pretrained=path).eval()
    for hw in ((96, 160), (48, 16)):
        x = torch.randn(1, 3, *hw)
        with torch.no_grad():
            maps, prefix = backbone.forward_taps(x)
            want = reference.forward_intermediates(x, indices=[1, 3], intermediates_only=True, norm=False)
        assert [tuple(m.shape) for m in maps] == [(1, 384, hw[0] // 16, hw[1] // 16)] * 2
        assert prefix[0].shape == (1, 5, 384)
        for got, w in zip(maps, want):  # within 1e-4 of the maps' scale (~40 here): GEMM libraries sum differently
            assert (got - w).abs().max() <= 1e-4 * w.abs().max()


def official_state(reference: torch.nn.Module) -> dict:
    """timm's model's weights in the official layout (facebookresearch/dinov3 key names, as its model saves them):
    storage_tokens, ls{1,2}.gamma, qkv.bias with a bias_mask masking a non-zero k third, SwiGLU w1/w2/w3, mask_token,
    rope_embed.periods (bfloat16) and the 7B's local_cls_norm."""
    out = {}
    state = reference.state_dict()
    swiglu = any('.mlp.fc1_g.' in k for k in state)
    for key, value in state.items():
        key = key.replace('reg_token', 'storage_tokens').replace('gamma_1', 'ls1.gamma').replace('gamma_2', 'ls2.gamma')
        if swiglu:
            key = key.replace('mlp.fc1_g.', 'mlp.w1.').replace('mlp.fc1_x.', 'mlp.w2.').replace('mlp.fc2.', 'mlp.w3.')
        if key.endswith('attn.q_bias'):
            v = state[key.replace('q_bias', 'v_bias')]
            out[key.replace('q_bias', 'qkv.bias')] = torch.cat([value, torch.randn_like(value), v])
            out[key.replace('q_bias', 'qkv.bias_mask')] = torch.cat([torch.ones_like(value), torch.zeros_like(value),
                                                                     torch.ones_like(v)])
        elif not key.endswith('attn.v_bias'):
            out[key] = value
    d = reference.embed_dim
    out.update({'mask_token': torch.zeros(1, d), 'rope_embed.periods': reference.rope.periods.to(torch.bfloat16),
                'local_cls_norm.weight': torch.ones(d), 'local_cls_norm.bias': torch.zeros(d)})
    return out


def test_official_layout_loads_to_the_official_models_outputs(tmp_path):
    """The official model runs on the periods its file stores (rounded to bfloat16, a 1e-3 relative change of the
    rotary angles): timm's model given those periods is the reference; ours takes them from the file, and saved
    in this project's layout and loaded again keeps them."""
    reference = strong_reference(SMALLEST_QKVB, depth=2, num_classes=0)
    state = official_state(reference)
    assert 'blocks.0.mlp.w3.weight' in state and 'storage_tokens' in state
    torch.save(state, tmp_path / 'dinov3_vits16plus.pth')
    exact = zoo.create_classifier(SMALLEST_QKVB, depth=2)
    zoo.load_pretrained(exact, {k: v for k, v in state.items() if k != 'rope_embed.periods'})
    ours = zoo.create_classifier(SMALLEST_QKVB, depth=2)
    report = zoo.load_pretrained(ours, tmp_path / 'dinov3_vits16plus.pth')
    assert report.format == 'official' and not (report.missing or report.unexpected)
    assert not torch.equal(ours.blocks[0].attn.rope.periods(), exact.blocks[0].attn.rope.periods())
    with torch.no_grad():
        reference.rope.periods.copy_(state['rope_embed.periods'].float())
    assert_classifier_equals_timm(ours.eval(), reference, ((256, 256), (80, 144)))
    x = torch.randn(1, 3, 80, 144)
    with torch.no_grad():  # without the stored periods the outputs move by more than the parity tolerance
        moved = (exact.eval()(x) - ours(x)).abs().max() / ours(x).abs().max()
    assert moved > 1e-4, moved
    again = zoo.create_classifier(SMALLEST_QKVB, depth=2)
    zoo.load_pretrained(again, ours.state_dict())
    with torch.no_grad():
        assert torch.equal(again.eval()(x), ours(x))


def test_official_key_bias_that_is_not_masked_is_refused(tmp_path):
    state = official_state(strong_reference(SMALLEST_QKVB, depth=1, num_classes=0))
    del state['blocks.0.attn.qkv.bias_mask']
    torch.save(state, tmp_path / 'w.pth')
    with pytest.raises(CheckpointLayoutError, match=r"key 'blocks.0.attn.qkv.bias': the key bias is not zero"):
        zoo.create_classifier(SMALLEST_QKVB, depth=1, pretrained=tmp_path / 'w.pth')


HF_SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=64,
                patch_size=16, num_register_tokens=4, layerscale_value=1.0)
OURS_SMALL = dict(embed_dim=64, depth=2, num_heads=4, mlp_ratio=2)


@pytest.mark.parametrize('gated', [False, True])
def test_transformers_dinov3_loads_to_its_hidden_states_and_pooled_output(gated, tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.DINOv3ViTConfig(**HF_SMALL, use_gated_mlp=gated, hidden_act='silu' if gated else 'gelu')
    torch.manual_seed(0)
    reference = perturb_(transformers.DINOv3ViTModel(config), std=0.1).eval()
    reference.save_pretrained(tmp_path)
    options = dict(OURS_SMALL, swiglu=gated)
    pooled = zoo.create_classifier(SMALLEST_QKVB, global_pool='token', **options)
    report = zoo.load_pretrained(pooled, tmp_path)
    assert report.format == 'hf' and not (report.missing or report.unexpected)
    backbone = zoo.create_backbone(SMALLEST_QKVB, out_indices=(0, 1), pretrained=tmp_path, tap_norm=True,
                                   **options).eval()
    for hw in ((64, 64), (48, 80)):
        x = torch.randn(2, 3, *hw)
        with torch.no_grad():
            out = reference(pixel_values=x, output_hidden_states=True)
            features = pooled.eval().forward_features(x)
            cls = pooled.forward_head(features, pre_logits=True)
            maps, _ = backbone.forward_taps(x)
        assert (features - out.last_hidden_state).abs().max() <= 1e-4
        assert (cls - out.pooler_output).abs().max() <= 1e-4
        for got, hidden in zip(maps, out.hidden_states[1:]):  # taps through the final norm
            want = reference.norm(hidden)[:, 5:].transpose(1, 2).reshape(got.shape)
            assert (got - want).abs().max() <= 1e-4


def test_transformers_nonzero_key_bias_is_refused(tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.DINOv3ViTConfig(**HF_SMALL, key_bias=True)
    reference = perturb_(transformers.DINOv3ViTModel(config))
    reference.save_pretrained(tmp_path)
    with pytest.raises(CheckpointLayoutError, match=r"key 'layer.0.attention.k_proj.bias': the key bias is not zero"):
        zoo.create_classifier(SMALLEST_QKVB, pretrained=tmp_path, **OURS_SMALL)


def test_swiglu_block_missing_one_input_projection_names_it(tmp_path):
    from safetensors.torch import load_file, save_file
    path = save_safetensors(strong_reference(SMALLEST_QKVB, depth=1, num_classes=0), tmp_path / 'w.safetensors')
    state = load_file(path)
    del state['blocks.0.mlp.fc1_x.weight']
    save_file(state, path)
    with pytest.raises(CheckpointLayoutError, match=r"key 'blocks\.0\.mlp\.fc1_x\.weight': missing beside "
                                                    r"fc1_g\.weight \(the SwiGLU's gate and value\)"):
        zoo.create_classifier(SMALLEST_QKVB, depth=1, pretrained=path)
