"""Blocks, DropPath, LayerScale, patch embedding, positional encodings and prefix tokens."""
import math

import pytest
import torch
import torch.nn.functional as F

from zoo.core import (
    Block,
    DropPath,
    LearnedPosEmbed,
    PatchEmbed,
    PrefixTokens,
    resample_grid_embed,
    sincos_2d,
    vit_parts,
)


def test_pre_ln_block_is_the_residual_formula():
    block = Block(16, **vit_parts(16, 2), init_values=0.5).eval()
    x = torch.randn(2, 5, 16)
    y = x + 0.5 * block.attn(block.norm1(x))
    expected = y + 0.5 * block.mlp(block.norm2(y))
    torch.testing.assert_close(block(x), expected)


def test_post_ln_block_normalises_after_each_residual():
    block = Block(16, **vit_parts(16, 2), norm_placement='post').eval()
    x = torch.randn(2, 5, 16)
    y = F.layer_norm(x + block.attn(x), (16,), block.norm1.weight, block.norm1.bias, eps=1e-6)
    expected = F.layer_norm(y + block.mlp(y), (16,), block.norm2.weight, block.norm2.bias, eps=1e-6)
    torch.testing.assert_close(block(x), expected)


def test_block_returns_attention_weights_of_its_layer():
    block = Block(16, **vit_parts(16, 2)).eval()
    x = torch.randn(1, 4, 16)
    out, attn = block(x, return_attn=True)
    _, expected = block.attn(block.norm1(x), return_attn=True)
    torch.testing.assert_close(out, block(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(attn, expected)


def test_drop_path_drops_whole_samples_and_rescales():
    drop = DropPath(0.5).train()
    x = torch.ones(400, 3, 2)
    y = drop(x)
    per_sample = y.flatten(1)
    assert set(per_sample.unique().tolist()) <= {0.0, 2.0}
    assert (per_sample == per_sample[:, :1]).all()  # a sample is kept or dropped as a whole
    assert 0.35 < (per_sample[:, 0] == 0).float().mean() < 0.65
    assert torch.equal(drop.eval()(x), x)


def test_stack_of_four_blocks_keeps_shapes_and_gradients_reach_the_patch_embedding():
    embed = PatchEmbed(8, 3, 32)
    blocks = torch.nn.Sequential(*[Block(32, **vit_parts(32, 4), drop_path=0.1, init_values=1e-5) for _ in range(4)])
    tokens, grid = embed(torch.randn(2, 3, 24, 40))
    assert grid == (3, 5) and tokens.shape == (2, 15, 32)
    out = blocks(tokens)
    assert out.shape == tokens.shape
    out.square().mean().backward()
    assert embed.proj.weight.grad is not None and embed.proj.weight.grad.abs().sum() > 0


def test_patch_embedding_rejects_untileable_sizes_and_wrong_channels():
    embed = PatchEmbed(16, 3, 8)
    with pytest.raises(ValueError, match=r'225x224 cannot be tiled by 16x16.*multiple of 16'):
        embed(torch.randn(1, 3, 225, 224))
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\).*\(1, 4, 32, 32\)'):
        embed(torch.randn(1, 4, 32, 32))
    overlapping = PatchEmbed(7, 3, 8, stride=4, padding=2)  # CvT-style conv embedding tiles anything
    assert overlapping(torch.randn(1, 3, 33, 50))[1] == ((33 + 4 - 7) // 4 + 1, (50 + 4 - 7) // 4 + 1)


def test_resampling_matches_timm_for_non_square_grids_in_each_mode():
    timm_pos = pytest.importorskip('timm.layers.pos_embed')
    table = torch.randn(1, 2 + 6 * 4, 8)
    for mode in ('bicubic', 'bilinear'):
        ours = resample_grid_embed(table, (9, 5), (6, 4), num_prefix=2, mode=mode)
        ref = timm_pos.resample_abs_pos_embed(table, (9, 5), (6, 4), num_prefix_tokens=2, interpolation=mode)
        torch.testing.assert_close(ours, ref)
        torch.testing.assert_close(ours[:, :2], table[:, :2])  # prefix rows untouched
    assert resample_grid_embed(table, (6, 4), (6, 4), num_prefix=2) is table


def test_resampling_runs_in_float32_and_keeps_dtype():
    table = torch.randn(1, 16, 8)
    half = resample_grid_embed(table.bfloat16(), (6, 6), (4, 4))
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), resample_grid_embed(table.bfloat16().float(), (6, 6), (4, 4)),
                               atol=1e-2, rtol=1e-2)


def test_learned_embedding_follows_the_input_grid_and_refuses_to_guess_non_square_grids():
    pos = LearnedPosEmbed((4, 6), 8, num_prefix=1)
    assert pos((4, 6)) is pos.weight
    assert pos((5, 7)).shape == (1, 1 + 35, 8)
    with pytest.raises(ValueError, match='not a square'):
        pos.resample_checkpoint(torch.randn(1, 1 + 12, 8))
    assert pos.resample_checkpoint(torch.randn(1, 1 + 12, 8), old_grid=(3, 4)).shape == pos.weight.shape


def test_sincos_embedding_formula():
    grid, dim = (3, 5), 16
    table = sincos_2d(grid, dim)[0]
    assert table.shape == (15, 16)
    row, col, k = 2, 3, 1  # token at y=2, x=3; frequency index 1 of 4
    omega = 1 / 10000 ** (k / 4)
    token = table[row * 5 + col]
    assert token[k].item() == pytest.approx(math.sin(col * omega), abs=1e-6)
    assert token[4 + k].item() == pytest.approx(math.cos(col * omega), abs=1e-6)
    assert token[8 + k].item() == pytest.approx(math.sin(row * omega), abs=1e-6)
    assert token[12 + k].item() == pytest.approx(math.cos(row * omega), abs=1e-6)


def test_prefix_tokens_order_and_names():
    prefix = PrefixTokens(4, cls=True, dist=True, registers=2)
    assert prefix.names == ['cls', 'dist', 'reg0', 'reg1'] and len(prefix) == 4
    x = torch.randn(3, 5, 4)
    out = prefix(x)
    assert out.shape == (3, 9, 4)
    torch.testing.assert_close(out[:, 0], prefix.cls[0].expand(3, 4))
    torch.testing.assert_close(out[:, 1], prefix.dist[0].expand(3, 4))
    torch.testing.assert_close(out[:, 2:4], prefix.registers.expand(3, 2, 4))
    torch.testing.assert_close(out[:, 4:], x)


@pytest.mark.parametrize('act', [torch.nn.SiLU, torch.nn.Identity, torch.nn.Sigmoid])
def test_gated_mlp_without_autograd_gives_the_formula_and_keeps_gradients_with_it(act):
    """Without autograd the gated MLP writes act(gate) * value into the activation's output (one buffer less);
    the values are the formula's either way, and with autograd (also for an activation that saves its output, the
    sigmoid) the gradients flow as the formula's."""
    from zoo.core import Mlp
    mlp = Mlp(8, 6, act_layer=act, gated=True)
    x = torch.randn(2, 5, 8, requires_grad=True)
    gate, value = F.linear(x, mlp.fc1.weight, mlp.fc1.bias).chunk(2, dim=-1)
    want = F.linear(act()(gate) * value, mlp.fc2.weight, mlp.fc2.bias)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x), want)
    with torch.inference_mode():
        torch.testing.assert_close(mlp(x.detach()), want.detach())
    got = mlp(x)
    torch.testing.assert_close(got, want)
    grads = torch.autograd.grad(got.square().sum(), [x, mlp.fc1.weight])
    for g, w in zip(grads, torch.autograd.grad(want.square().sum(), [x, mlp.fc1.weight])):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize('autocast', [False, True])
def test_mlp_recomputing_gelu_gives_the_same_values_and_gradients(autocast):
    from zoo.core import Mlp
    mlp = Mlp(16, 64)
    assert mlp.recompute_act
    x = torch.randn(2, 5, 16, requires_grad=True)
    results = []
    for recompute in (True, False):
        mlp.recompute_act = recompute
        mlp.zero_grad()
        x.grad = None
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            out = mlp(x)
        out.float().square().sum().backward()
        results.append([out] + [p.grad.clone() for p in mlp.parameters()] + [x.grad.clone()])
    for ours, plain in zip(*results):
        assert ours.dtype == plain.dtype
        torch.testing.assert_close(ours, plain)


@pytest.mark.parametrize('norm', [False, True])
def test_gated_mlp_without_grad_is_the_swiglu_formula(norm):
    from torch import nn

    from zoo.core import Mlp
    torch.manual_seed(0)
    mlp = Mlp(16, 24, act_layer=nn.SiLU, gated=True, norm=nn.LayerNorm(24) if norm else None)
    x = torch.randn(2, 5, 16)
    h = F.linear(x, mlp.fc1.weight, mlp.fc1.bias)
    gated = F.silu(h[..., :24]) * h[..., 24:]  # [gate | value]
    expected = F.linear(mlp.norm(gated) if norm else gated, mlp.fc2.weight, mlp.fc2.bias)
    for mode in (torch.no_grad, torch.inference_mode):  # the in-place activation: rounded as the formula
        with mode():
            assert torch.equal(mlp(x), expected)
    x.requires_grad_(True)  # the autograd path, and gradients through it
    out = mlp(x)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    assert x.grad is not None and mlp.fc1.weight.grad is not None
