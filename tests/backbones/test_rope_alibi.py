"""2-D RoPE against timm's RoPE ViTs (random init, saved, loaded through zoo.weights) and its relative-position
property; 2-D ALiBi against its formula written out here, and the translation equivariance that formula implies."""
import math

import pytest
import torch

import zoo
from zoo.core import Attention
from zoo.core.alibi import AlibiBias, alibi_slopes
from zoo.core.rope import AxialRope, MixedRope, make_rope

from ..reference import save_safetensors, timm_reference

# axial (x first, CLS), mixed (learned frequencies), axial + absolute table, and timm's SBB form (row first,
# positions rescaled to a 16x16 reference grid, a register token, mean pooling): every RoPE code path.
ROPE_NAMES = ['vit_small_patch16_rope_224', 'vit_small_patch16_rope_mixed_224', 'vit_small_patch16_rope_ape_224',
              'vit_medium_patch16_rope_reg1_gap_256']


@pytest.mark.slow
@pytest.mark.parametrize('name', ROPE_NAMES)
def test_rope_vit_logits_match_timm_at_native_and_non_square_size(name, tmp_path):
    pytest.importorskip('timm')
    torch.manual_seed(0)
    ref = timm_reference(name, dynamic_img_size=True)
    ours = zoo.create_classifier(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    size = ours.pretrained_cfg['input_size']
    with torch.no_grad():
        for hw in (size, (160, 288)):
            x = torch.randn(1, 3, *hw)
            diff = (ours(x) - ref(x)).abs().max().item()
            assert diff <= 1e-4, f"{name} at {hw}: max abs diff {diff}"


@pytest.mark.slow
def test_rope_backbone_taps_match_timm_intermediates(tmp_path):
    pytest.importorskip('timm')
    torch.manual_seed(0)
    name = 'vit_small_patch16_rope_mixed_224'
    ref = timm_reference(name, dynamic_img_size=True)
    backbone = zoo.create_backbone(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    x = torch.randn(1, 3, 160, 288)
    with torch.no_grad():
        maps, prefixes = backbone.forward_taps(x)
        ref_maps, ref_prefixes = zip(*ref.forward_intermediates(
            x, indices=list(backbone.out_indices), norm=False, output_fmt='NCHW', intermediates_only=True,
            return_prefix_tokens=True))
    for ours_map, ref_map, ours_p, ref_p in zip(maps, ref_maps, prefixes, ref_prefixes):
        assert ours_map.shape == (1, 384, 10, 18)
        torch.testing.assert_close(ours_map, ref_map, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(ours_p, ref_p, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('rope', [AxialRope(8, temperature=100.0), AxialRope(8, indexing='ij', ref_grid=(4, 4)),
                                  MixedRope(8, num_heads=2)])
def test_rope_scores_depend_only_on_the_offset_and_leave_prefix_tokens(rope):
    torch.manual_seed(0)
    grid, prefix = (3, 5), 2
    q = torch.randn(1, 2, 1, 8).expand(1, 2, prefix + 15, 8).clone()  # one query vector at every position
    k = torch.randn(1, 2, 1, 8).expand(1, 2, prefix + 15, 8).clone()
    q[..., :prefix, :], k[..., :prefix, :] = torch.randn(1, 2, prefix, 8), torch.randn(1, 2, prefix, 8)
    q_rot, k_rot = rope(q, k, grid)
    assert torch.equal(q_rot[..., :prefix, :], q[..., :prefix, :]) and torch.equal(k_rot[..., :prefix, :],
                                                                                     k[..., :prefix, :])
    assert not torch.allclose(q_rot[..., prefix:, :], q[..., prefix:, :])
    scores = (q_rot @ k_rot.transpose(-2, -1))[..., prefix:, prefix:].reshape(1, 2, 3, 5, 3, 5)
    # offset (dy, dx) = (1, 2) from two different query positions
    torch.testing.assert_close(scores[..., 0, 0, 1, 2], scores[..., 1, 2, 2, 4], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scores[..., 0, 1, 0, 1], scores[..., 2, 3, 2, 3], atol=1e-5, rtol=1e-5)  # offset 0
    # the norm of every turned token is kept (a rotation)
    torch.testing.assert_close(q_rot.norm(dim=-1), q.norm(dim=-1))


def test_rope_refuses_what_it_cannot_turn():
    with pytest.raises(ValueError, match='divisible by 4'):
        AxialRope(6)
    with pytest.raises(ValueError, match="'axial', 'mixed' or 'dinov3'"):
        make_rope(dict(kind='spiral'), 8, 2)
    with pytest.raises(ValueError, match='does not take'):
        make_rope(dict(kind='mixed', ref_grid=(4, 4)), 8, 2)
    with pytest.raises(ValueError, match='needs the token grid'):
        AxialRope(8)(torch.zeros(1, 1, 4, 8), torch.zeros(1, 1, 4, 8), None)
    with pytest.raises(ValueError, match='every patch token'):
        AxialRope(8)(torch.zeros(1, 1, 16, 8), torch.zeros(1, 1, 4, 8), (4, 4))


# ALiBi: the slopes as the paper lists them, and the bias written out token by token.
PAPER_SLOPES = {8: [2 ** -1, 2 ** -2, 2 ** -3, 2 ** -4, 2 ** -5, 2 ** -6, 2 ** -7, 2 ** -8],
                6: [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3],  # 4 heads' slopes, then 8 heads' odd ones
                3: [2 ** -4, 2 ** -8, 2 ** -2]}


@pytest.mark.parametrize('heads', sorted(PAPER_SLOPES))
def test_alibi_slopes_are_the_papers(heads):
    torch.testing.assert_close(alibi_slopes(heads), torch.tensor(PAPER_SLOPES[heads]))


@pytest.mark.parametrize('grid,prefix,heads,metric', [((3, 4), 1, 6, 'euclidean'), ((5, 2), 0, 8, 'manhattan'),
                                                      ((5, 2), 2, 3, 'euclidean')])
def test_alibi_bias_is_the_formula(grid, prefix, heads, metric):
    bias = AlibiBias(heads, num_prefix=prefix, metric=metric)(grid)
    h, w = grid
    n = prefix + h * w
    expected = torch.zeros(heads, n, n)
    for head, slope in enumerate(PAPER_SLOPES[heads]):
        for i in range(h * w):
            for j in range(h * w):
                dy, dx = i // w - j // w, i % w - j % w
                dist = math.sqrt(dy * dy + dx * dx) if metric == 'euclidean' else abs(dy) + abs(dx)
                expected[head, prefix + i, prefix + j] = -slope * dist
    torch.testing.assert_close(bias, expected)


def test_alibi_attention_rows_are_translation_equivariant():
    """With every token the same, log a(q, k1) - log a(q, k2) = -slope (d(q, k1) - d(q, k2)) whatever the softmax's
    normaliser, so it is the same for the query and keys shifted together: the rows are translates of each other."""
    torch.manual_seed(0)
    grid, heads = (6, 7), 4
    attn = Attention(16, heads, pos_bias=AlibiBias(heads, num_prefix=1)).eval()
    x = torch.randn(1, 1, 16).expand(1, 1 + 42, 16)
    with torch.no_grad():
        _, weights = attn(x, grid, return_attn=True)
    log_a = weights[0].log()[:, 1:, 1:].reshape(heads, 6, 7, 6, 7)
    slopes = alibi_slopes(heads)

    def log_ratio(q, k1, k2):
        return log_a[:, q[0], q[1], k1[0], k1[1]] - log_a[:, q[0], q[1], k2[0], k2[1]]

    for shift in ((0, 0), (1, 2), (3, 1)):
        moved = [(a + shift[0], b + shift[1]) for a, b in ((1, 1), (2, 3), (1, 4))]
        expected = -slopes * (math.hypot(1, 2) - math.hypot(0, 3))
        torch.testing.assert_close(log_ratio(*moved), expected, atol=1e-5, rtol=1e-5)
    # the prefix token is neither penalised nor penalises: the CLS row is uniform over identical tokens
    torch.testing.assert_close(weights[0, :, 0], torch.full((heads, 43), 1 / 43))


def test_vit_with_alibi_or_rope_runs_at_any_grid_and_trains():
    torch.manual_seed(0)
    for options in (dict(alibi=True, pos_embed='none'), dict(alibi=dict(metric='manhattan')),
                    dict(rope=dict(kind='mixed'), pos_embed='none', reg_tokens=2)):
        backbone = zoo.create_backbone('vit_tiny_patch16_224', depth=2, out_indices=(0, 1), **options)
        for hw in ((48, 80), (96, 64)):
            maps, _ = backbone.forward_taps(torch.randn(1, 3, *hw))
            assert maps[-1].shape == (1, 192, hw[0] // 16, hw[1] // 16)
        maps[-1].mean().backward()
        assert all(p.grad is not None for n, p in backbone.named_parameters() if 'blocks.1' in n)
    assert 'blocks.0.attn.rope.freqs' in backbone.no_weight_decay()
    with pytest.raises(ValueError, match="'euclidean' or 'manhattan'"):
        zoo.create_backbone('vit_tiny_patch16_224', depth=1, out_indices=(0,), alibi=dict(metric='chebyshev'))
