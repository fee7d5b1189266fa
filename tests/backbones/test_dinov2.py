"""DINOv2 backbones equal timm's and transformers' given the same weights, at the build size and a non-square one;
the official layout (registers, SwiGLU ``w12``/``w3``, chunked blocks) loads; DINOv2's offset resampling follows
its formula."""
import math

import pytest
import torch
from torch import nn

import zoo
from zoo.core.pos_embed import resample_grid_embed

from ..reference import perturb_, save_safetensors, timm_reference

timm = pytest.importorskip('timm')
TAPS = (2, 5, 8, 11)


@pytest.mark.slow
@pytest.mark.parametrize('name', ['vit_small_patch14_dinov2', 'vit_small_patch14_reg4_dinov2'])
def test_features_equal_timm_at_518_and_non_square(name, tmp_path):
    reference = timm_reference(name, dynamic_img_size=True)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_backbone(name, pretrained=path).eval()
    assert ours.out_indices == TAPS and len(ours.prefix_names) == reference.num_prefix_tokens
    for size in ((518, 518), (476, 644)):
        x = torch.randn(1, 3, *size)
        with torch.no_grad():
            expected, expected_prefix = reference.forward_intermediates(
                x, indices=list(TAPS), return_prefix_tokens=True, intermediates_only=True,
                output_fmt='NCHW'), None
            expected, expected_prefix = zip(*expected)
            maps, prefix = ours.forward_taps(x)
        for got, want in zip(maps + prefix, list(expected) + list(expected_prefix)):
            assert got.shape == want.shape
            assert (got - want).abs().max() <= 1e-4, size


def official_state(reference: nn.Module) -> dict:
    """timm's DINOv2-with-registers state in the official layout: the CLS row of the position table split off the
    CLS token again (any split sums the same), SwiGLU as w12/w3, blocks in chunks of 1, a mask token."""
    state = {k: v.clone() for k, v in reference.state_dict().items()}
    cls_row = torch.randn_like(state['cls_token'])
    state['cls_token'] = state['cls_token'] - cls_row
    state['pos_embed'] = torch.cat([cls_row, state['pos_embed']], dim=1)
    state['register_tokens'] = state.pop('reg_token')
    state['mask_token'] = torch.randn(1, state['cls_token'].shape[-1])
    out = {}
    for key, value in state.items():
        key = key.replace('.mlp.fc1.', '.mlp.w12.').replace('.mlp.fc2.', '.mlp.w3.')
        if key.startswith('blocks.'):
            key = f'blocks.{key.split(".")[1]}.{key[len("blocks."):]}'
        out[key] = value
    return out


def test_official_layout_with_registers_and_swiglu_loads_to_timm_outputs(tmp_path):
    from timm.layers import SwiGLUPacked
    reference = timm_reference('vit_small_patch14_reg4_dinov2', depth=2, img_size=56, mlp_layer=SwiGLUPacked,
                               act_layer=nn.SiLU, mlp_ratio=2 * 2.75, dynamic_img_size=True)
    torch.save(official_state(reference), tmp_path / 'official.pth')
    ours = zoo.create_classifier('vit_small_patch14_reg4_dinov2', depth=2, img_size=56, mlp_ratio=2.75, swiglu=True,
                                 num_classes=1000, pretrained=tmp_path / 'official.pth').eval()
    assert ours.blocks[0].mlp.fc1.out_features == 2 * ours.blocks[0].mlp.fc2.in_features
    for size in ((56, 56), (42, 84)):
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=1e-5)


HF_SMALL = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, image_size=56, patch_size=14,
                layerscale_value=0.5)


@pytest.mark.parametrize('cls,overrides', [('Dinov2Model', {}), ('Dinov2Model', dict(use_swiglu_ffn=True)),
                                           ('Dinov2WithRegistersModel', dict(num_register_tokens=4))])
def test_transformers_layout_loads_to_transformers_outputs(cls, overrides, tmp_path):
    transformers = pytest.importorskip('transformers')
    config_cls = getattr(transformers, cls.replace('Model', 'Config'))
    reference = perturb_(getattr(transformers, cls)(config_cls(**HF_SMALL, **overrides))).eval()
    reference.save_pretrained(tmp_path)
    registers = overrides.get('num_register_tokens', 0)
    swiglu = dict(swiglu=True, mlp_ratio=176 / 64) if overrides.get('use_swiglu_ffn') else {}  # (170 + 7) // 8 * 8
    name = 'vit_small_patch14_reg4_dinov2' if registers else 'vit_small_patch14_dinov2'
    # transformers resamples the table bicubically to the grid, with antialias only in the register model
    ours = zoo.create_backbone(name, embed_dim=64, depth=3, num_heads=4, img_size=56, out_indices=(2,),
                               tap_norm=True, pos_antialias=bool(registers), pretrained=tmp_path, **swiglu).eval()
    for size in ((56, 56), (70, 98)):
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            expected = reference(pixel_values=x).last_hidden_state  # b (1 + r + h w) d after the final norm
            (got,), (prefix,) = ours.forward_taps(x)
        assert (prefix - expected[:, :1 + registers]).abs().max() <= 1e-4
        patches = expected[:, 1 + registers:].transpose(1, 2).reshape(got.shape)
        assert (got - patches).abs().max() <= 1e-4, size


def bicubic_matrix(old: int, new: int, scale: float, a: float = -0.75) -> torch.Tensor:
    """'new old' weights of 1-D bicubic convolution (Keys, a = -0.75) sampling at (i + 0.5) / scale - 0.5, borders
    clamped: the half-pixel rule of F.interpolate with an explicit scale factor."""
    def kernel(t):
        t = abs(t)
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1 if t <= 1 else a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
    out = torch.zeros(new, old, dtype=torch.float64)
    for i in range(new):
        src = (i + 0.5) / scale - 0.5
        base = math.floor(src)
        for j in range(base - 1, base + 3):
            out[i, min(max(j, 0), old - 1)] += kernel(src - j)
    return out


def test_dinov2_resampling_follows_its_offset_formula():
    old, new = (6, 6), (4, 9)
    embed = torch.randn(1, 1 + old[0] * old[1], 8)
    got = resample_grid_embed(embed, new, old, num_prefix=1, mode='dinov2', antialias=False)
    rows, cols = (bicubic_matrix(o, n, (n + 0.1) / o) for o, n in zip(old, new))
    grid = embed[0, 1:].double().reshape(*old, 8)
    expected = torch.einsum('Hh,hwd,Ww->HWd', rows, grid, cols).reshape(1, -1, 8).float()
    torch.testing.assert_close(got[:, 1:], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[:, :1], embed[:, :1])
    by_size = resample_grid_embed(embed, new, old, num_prefix=1, mode='bicubic', antialias=False)
    assert (by_size - got).abs().max() > 1e-3  # the offset moves the samples: the modes differ


def test_giant_uses_swiglu_with_dinov2_widths():
    variant = zoo.registry.get_variant('vit_giant_patch14_dinov2')
    args = variant.kwargs
    assert args['spec'].block.mlp.kind == 'swiglu'
    assert int(args['embed_dim'] * args['mlp_ratio']) == 4096  # (int(6144 * 2 / 3) + 7) // 8 * 8
    block = zoo.create_backbone('vit_small_patch14_dinov2', depth=1, out_indices=(0,), swiglu=True,
                                mlp_ratio=args['mlp_ratio'], embed_dim=48, num_heads=2).blocks[0]
    assert isinstance(block.mlp.act, nn.SiLU) and block.mlp.fc1.out_features == 2 * int(48 * args['mlp_ratio'])
