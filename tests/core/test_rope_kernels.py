"""The one-pass RoPE kernels (complex pairs, in-place halves, the prefix turned by angle 0) against the written-out
formula x cos + quarter(x) sin on the patch tokens with the prefix concatenated back (the path torch.export traces),
for every rope kind and pairing: values, q subsets, strided and low-precision inputs, gradients; and the kernels
against a pair turned by hand."""
import math

import pytest
import torch

import zoo.core.rope as rope_module
from zoo.core.grid import TokenGrid
from zoo.core.rope import AxialRope, DINOv3Rope, MixedRope, turn_halves, turn_pairs

ROPES = {
    'axial_xy': lambda: AxialRope(16, temperature=100.0),
    'axial_ij_ref': lambda: AxialRope(16, temperature=10000.0, indexing='ij', ref_grid=(4, 4), offset=1.0),
    'mixed': lambda: MixedRope(16, num_heads=3),
    'dinov3': lambda: DINOv3Rope(16).eval(),
    'dinov3_periods': lambda: DINOv3Rope(16, base=None, min_period=0.5, max_period=40.0, normalize='max').eval(),
}


def written_out(rope, q, k, grid):
    """The formula path (what runs under torch.export), chosen by hand."""
    cos, sin = rope._rotation(grid, q.device)
    prefix = k.shape[-2] - grid[0] * grid[1]
    k = torch.cat([k[..., :prefix, :], rope.turn(k[..., prefix:, :], cos, sin)], dim=-2)
    queries = q.shape[-2] - prefix
    if queries > 0:
        q = torch.cat([q[..., :prefix, :], rope.turn(q[..., prefix:, :], cos[..., :queries, :],
                                                     sin[..., :queries, :])], dim=-2)
    return q, k


def qk_views(b, n, heads, d, dtype=torch.float32, requires_grad=False):
    """q and k as Attention gets them: strided 'b heads n d' views of one fused 'b n (3 heads d)' projection."""
    qkv = torch.randn(b, n, 3 * heads * d, dtype=dtype, requires_grad=requires_grad)
    q, k, _ = (t.unflatten(-1, (heads, d)).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
    return qkv, q, k


@pytest.mark.parametrize('kind', sorted(ROPES))
@pytest.mark.parametrize('prefix', [0, 3])
def test_kernels_equal_the_written_out_formula(kind, prefix):
    torch.manual_seed(0)
    rope, grid = ROPES[kind](), (3, 5)
    _, q, k = qk_views(2, prefix + 15, 3, 16)
    assert rope_module.eager_kernels(k)
    got, want = rope(q, k, grid), written_out(rope, q, k, grid)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-6)
        assert torch.equal(g[..., :prefix, :], w[..., :prefix, :])  # the prefix tokens exactly as they came
        if rope.pairing == 'half':  # no fused multiply-add: rounded as the formula
            assert torch.equal(g, w)
    # a leading subset of queries (SeparateQKV num_queries): within the prefix, and reaching into the grid
    for queries in (min(prefix, 1), prefix + 4):
        got_q, _ = rope(q[..., :queries, :], k, grid)
        want_q, _ = written_out(rope, q[..., :queries, :], k, grid)
        torch.testing.assert_close(got_q, want_q, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize('kind', ['axial_xy', 'dinov3'])
def test_kernels_keep_low_precision_dtypes_and_odd_strides(kind):
    torch.manual_seed(0)
    rope, grid = ROPES[kind](), (2, 3)
    _, q, k = qk_views(2, 1 + 6, 2, 16, dtype=torch.bfloat16)
    for g, w in zip(rope(q, k, grid), written_out(rope, q, k, grid)):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g, w, atol=0, rtol=0)  # both in float32, rounded once
    # an odd storage offset (no complex view of it): copied, same values
    base = torch.randn(1 + 2 * 7 * 16)
    odd = base[1:].view(1, 2, 7, 16)
    for g, w in zip(rope(odd, odd, grid), written_out(rope, odd, odd, grid)):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize('kind', ['axial_ij_ref', 'mixed', 'dinov3'])
def test_kernel_gradients_equal_the_formulas(kind):
    torch.manual_seed(0)
    rope, grid = ROPES[kind](), (3, 4)
    rope.train()
    if isinstance(rope, DINOv3Rope):
        rope.rescale = None  # the same angles on both paths (no random draw)
    grads = []
    for path in (rope.forward, lambda q, k, g: written_out(rope, q, k, g)):
        torch.manual_seed(1)
        qkv, q, k = qk_views(2, 2 + 12, 3, 16, requires_grad=True)
        tq, tk = path(q, k, grid)
        weights = torch.randn(tq.shape)  # (not randn_like: the two paths lay their outputs out differently)
        ((tq * weights).sum() + (tk * weights.flip(-1)).sum()).backward()
        grads.append([qkv.grad] + [p.grad.clone() for p in rope.parameters()])
        rope.zero_grad()
    for g, w in zip(*grads):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_kernels_turn_a_pair_by_hand():
    a, b, angle = 0.3, -1.7, 0.9
    x = torch.tensor([a, b, 5.0, 7.0])
    table = torch.polar(torch.ones(2), torch.tensor([angle, 0.0]))
    got = turn_pairs(x[None], table[None])[0]
    want = torch.tensor([a * math.cos(angle) - b * math.sin(angle), b * math.cos(angle) + a * math.sin(angle),
                         5.0, 7.0])
    torch.testing.assert_close(got, want)
    # rotate half: channel 0 pairs with 2, channel 1 with 3
    x = torch.tensor([a, 5.0, b, 7.0])
    cos, sin = torch.tensor([math.cos(angle), 1.0] * 2), torch.tensor([math.sin(angle), 0.0])
    got = turn_halves(x[None], cos[None], sin[None])[0]
    want = torch.tensor([a * math.cos(angle) - b * math.sin(angle), 5.0, b * math.cos(angle) + a * math.sin(angle),
                         7.0])
    torch.testing.assert_close(got, want)


def test_tables_are_computed_once_per_forward_and_shared_by_equal_ropes():
    """The forward's TokenGrid carries the tables (per prefix length and settings); nothing module-global keeps them
    between forwards (issue 53: they lived in a module-level LRU cache)."""
    first, second = AxialRope(16, temperature=100.0), AxialRope(16, temperature=100.0)
    grid = TokenGrid((3, 5))
    tables = first.kernel_tables(grid, 'cpu', 1)
    assert second.kernel_tables(grid, 'cpu', 1)[0] is tables[0]
    assert first.kernel_tables(grid, 'cpu', 2)[0].shape == (1, 2 + 15, 8)
    assert AxialRope(16, temperature=10.0).kernel_tables(grid, 'cpu', 1)[0] is not tables[0]
    assert first.kernel_tables(TokenGrid((3, 5)), 'cpu', 1)[0] is not tables[0]  # the next forward's own
    assert first.kernel_tables((3, 5), 'cpu', 1)[0] is not first.kernel_tables((3, 5), 'cpu', 1)[0]  # a plain grid
    torch.testing.assert_close(first.kernel_tables((3, 5), 'cpu', 1)[0], tables[0])
    mixed = MixedRope(16, num_heads=2)  # learned frequencies: new tables on every call, differentiable
    assert mixed.kernel_tables(grid, 'cpu', 1)[0] is not mixed.kernel_tables(grid, 'cpu', 1)[0]
    assert mixed.kernel_tables(grid, 'cpu', 1)[0].requires_grad
    assert not [name for name, value in vars(rope_module).items() if isinstance(value, dict) and not
                name.startswith('__')]


def test_a_vit_forward_computes_its_rope_tables_once_for_all_blocks(monkeypatch):
    import zoo
    model = zoo.create_backbone('vit_small_patch16_dinov3', depth=3, embed_dim=48, num_heads=2, img_size=32,
                                out_indices=(2,)).eval()
    calls = []
    build = rope_module._Rope._kernel_tables
    monkeypatch.setattr(rope_module._Rope, '_kernel_tables', lambda self, *a: calls.append(a) or build(self, *a))
    with torch.no_grad():
        model(torch.randn(1, 3, 32, 32))
        assert len(calls) == 1
        model(torch.randn(1, 3, 32, 48))
    assert len(calls) == 2 and calls[1][0] == (2, 3)
