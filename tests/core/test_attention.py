"""The attention core against formulas written out here, and the rule that keeps it one idea: a family's own idea
is a part passed in (qkv, scale, pos_bias, rope, proj, a similarity mixin), never a flag of Attention or Block."""
import inspect
import math

import pytest
import torch
from torch import nn

import zoo
from zoo.core import Attention, Block, FusedQKV, SeparateQKV, ShiftedWindowAttention, vit_parts


def reference_attention(x, attn: Attention, scale=None, bias=None, num_queries=None):
    """softmax(q k^T * scale + bias) v, with q/k/v computed from the fused weight by hand."""
    c, h = x.shape[-1], attn.num_heads
    w, b = attn.qkv.weight, attn.qkv.bias
    q, k, v = (x @ w[i * c:(i + 1) * c].T + b[i * c:(i + 1) * c] for i in range(3))
    if num_queries is not None:
        q = q[:, :num_queries]
    split = lambda t: t.reshape(t.shape[0], t.shape[1], h, c // h).transpose(1, 2)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    scores = q @ k.transpose(-1, -2) * (scale if scale is not None else (c // h) ** -0.5)
    if bias is not None:
        scores = scores + bias
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(x.shape[0], -1, c)
    return attn.proj(out), weights


@pytest.fixture
def attn():
    return Attention(32, num_heads=4).eval()


def test_sdpa_and_explicit_paths_match_the_formula(attn):
    x = torch.randn(2, 10, 32)
    expected, weights = reference_attention(x, attn)
    out, returned = attn(x, return_attn=True)
    torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(returned, weights, atol=1e-6, rtol=1e-5)


def test_attention_rows_sum_to_one(attn):
    _, weights = attn(torch.randn(3, 7, 32), return_attn=True)
    assert weights.shape == (3, 4, 7, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 7))
    assert (weights >= 0).all()


def test_configurable_scale_is_used_by_both_paths():
    attn = Attention(32, num_heads=4, scale=32 ** -0.5).eval()  # CvT's embed_dim ** -0.5
    x = torch.randn(2, 9, 32)
    expected, _ = reference_attention(x, attn, scale=32 ** -0.5)
    torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn(x, return_attn=True)[0], expected, atol=1e-5, rtol=1e-5)
    default = Attention(32, num_heads=4)
    assert default.scale == pytest.approx(1 / math.sqrt(8))


def test_boolean_mask_blocks_keys_in_both_paths(attn):
    x = torch.randn(2, 6, 32)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[:, ..., 4:] = False  # the last two keys are padding
    out, weights = attn(x, mask=mask, return_attn=True)
    assert torch.all(weights[..., 4:] == 0)
    torch.testing.assert_close(attn(x, mask=mask), out, atol=1e-5, rtol=1e-5)
    # masking keys equals dropping them
    expected, _ = reference_attention(x[:, :4], attn)
    torch.testing.assert_close(out[:, :4], expected, atol=1e-5, rtol=1e-5)


def test_additive_mask_and_position_bias_hook():
    class ConstantBias(nn.Module):  # a grid-dependent bias, as a relative position table would give
        def __init__(self, heads):
            super().__init__()
            self.heads = heads

        def forward(self, grid):
            n = grid[0] * grid[1]
            return torch.arange(self.heads * n * n, dtype=torch.float32).reshape(self.heads, n, n).sin()

    attn = Attention(32, num_heads=4, pos_bias=ConstantBias(4)).eval()
    x = torch.randn(2, 6, 32)
    bias = ConstantBias(4)((2, 3))
    extra = torch.randn(2, 1, 6, 6)
    expected, _ = reference_attention(x, attn, bias=bias + extra)
    torch.testing.assert_close(attn(x, grid=(2, 3), mask=extra), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn(x, grid=(2, 3), mask=extra, return_attn=True)[0], expected, atol=1e-5, rtol=1e-5)


def separate_copy(fused: Attention, num_queries=None) -> Attention:
    """An Attention with three q/k/v Linears (asking with the first ``num_queries`` tokens) holding ``fused``'s
    weights."""
    c = fused.qkv.in_features
    separate = Attention(c, num_heads=fused.num_heads, qkv=SeparateQKV(c, num_queries=num_queries)).eval()
    with torch.no_grad():
        for i, part in enumerate((separate.qkv.q, separate.qkv.k, separate.qkv.v)):
            part.weight.copy_(fused.qkv.weight[i * c:(i + 1) * c])
            part.bias.copy_(fused.qkv.bias[i * c:(i + 1) * c])
        separate.proj.load_state_dict(fused.proj.state_dict())
    return separate


def test_cross_attention_with_a_query_subset(attn):
    x = torch.randn(2, 9, 32)
    cross = separate_copy(attn, num_queries=1)
    out, weights = cross(x, return_attn=True)
    assert out.shape == (2, 1, 32) and weights.shape == (2, 4, 1, 9)
    expected, _ = reference_attention(x, attn, num_queries=1)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cross(x), expected, atol=1e-5, rtol=1e-5)
    # a query subset gives the same rows as full self-attention
    torch.testing.assert_close(attn(x)[:, :1], expected, atol=1e-5, rtol=1e-5)


def test_separate_projections_equal_fused_ones(attn):
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(separate_copy(attn)(x), attn(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(separate_copy(attn, num_queries=2)(x), attn(x)[:, :2], atol=1e-5, rtol=1e-5)
    assert isinstance(attn.qkv, FusedQKV) and attn.qkv.weight.shape == (96, 32)


def test_attention_takes_parts_not_family_flags():
    """At most 9 constructor parameters, none serving one family (Swin V2's similarity, LeViT's head width,
    CoAtNet's output width, a bias flag a passed projection would ignore); a forward takes only what it honours."""
    params = list(inspect.signature(Attention.__init__).parameters)[1:]
    assert len(params) <= 9, params
    assert not {'similarity', 'head_dim', 'out_dim', 'qkv_bias'} & set(params), params
    assert 'num_queries' not in inspect.signature(Attention.forward).parameters  # a SeparateQKV part's
    swa = inspect.signature(ShiftedWindowAttention.forward).parameters  # honours a mask (merged with its own)
    assert list(swa) == list(inspect.signature(Attention.forward).parameters)


@pytest.mark.parametrize('mask_dtype', [torch.bool, torch.float32])
def test_window_attention_cuts_a_token_mask_into_its_windows(mask_dtype):
    """Windows of 2x2 on a 4x6 map, not shifted: the attention with a token mask is the plain attention with that
    mask and the same-window mask; an all-allowed mask changes nothing, shifted and padded (a 5x6 map) too."""
    torch.manual_seed(0)
    swa = ShiftedWindowAttention(16, 2, (2, 2)).eval()
    x, grid = torch.randn(2, 24, 16), (4, 6)
    allowed = torch.rand(2, 1, 24, 24) > 0.4
    allowed |= torch.eye(24, dtype=torch.bool)  # every query may attend to something
    rows, cols = torch.arange(24) // 6, torch.arange(24) % 6
    window = (rows // 2) * 3 + cols // 2
    same = window[:, None] == window[None, :]
    to_mask = (lambda m: m) if mask_dtype == torch.bool else \
        (lambda m: torch.zeros(m.shape).masked_fill(~m, float('-inf')))
    with torch.no_grad():
        want = Attention.forward(swa, x, grid, mask=to_mask(allowed & same))
        torch.testing.assert_close(swa(x, grid, mask=to_mask(allowed)), want, atol=1e-5, rtol=1e-5)
        shifted = ShiftedWindowAttention(16, 2, (2, 2), shifted=True).eval()
        y = torch.randn(2, 30, 16)
        everything = torch.ones(1, 1, 30, 30, dtype=torch.bool)
        torch.testing.assert_close(shifted(y, (5, 6), mask=to_mask(everything)), shifted(y, (5, 6)))


def test_block_has_one_norm_placement_option():
    params = inspect.signature(Block.__init__).parameters
    assert 'norm_placement' in params and 'post_norm' not in params
    with pytest.raises(ValueError, match="norm_placement must be one of 'pre', 'post', 'res_post'"):
        Block(16, **vit_parts(16, 2), norm_placement='sandwich')


def test_no_family_switches_sdpa_off_after_construction():
    """LeViT's values are wider than its keys: the attention itself takes the explicit path for them, and
    :func:`zoo.core.set_fused_attention` stays the one switch of the path (no layer sets ``fused`` of its own)."""
    model = zoo.create_backbone('levit_128s', img_size=64)
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    assert layers and not [m for m in layers if 'fused' in vars(m)]


def test_width_must_split_into_heads():
    with pytest.raises(ValueError, match='not divisible by num_heads=5'):
        Attention(32, num_heads=5)
