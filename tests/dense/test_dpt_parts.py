"""DPT readouts, resampling, fusion, neck input descriptions and the depth head's precision."""
import pytest
import torch
import torch.nn.functional as F

from heads.decode_heads import DPTDepthHead, DPTSegHead
from heads.necks import DPTNeck, FusionBlock, Readout, ReassembleLevel


@pytest.fixture
def level():
    return torch.randn(2, 8, 3, 5), torch.randn(2, 2, 8)  # map 'b c h w', prefix 'b p c' (cls, dist)


def test_ignore_readout_is_invariant_to_the_prefix(level):
    x, prefix = level
    readout = Readout('ignore', 8, ['cls'])
    torch.testing.assert_close(readout(x, prefix), x)
    torch.testing.assert_close(readout(x, prefix * 10), x)


def test_add_readout_adds_cls_or_the_mean_of_cls_and_dist(level):
    x, prefix = level
    torch.testing.assert_close(Readout('add', 8, ['cls'])(x, prefix[:, :1]), x + prefix[:, 0, :, None, None])
    deit = Readout('add', 8, ['cls', 'dist'])(x, prefix)
    torch.testing.assert_close(deit, x + prefix.mean(1)[:, :, None, None])
    readout = Readout('add', 8, ['cls'])
    assert not torch.allclose(readout(x, prefix[:, :1] + 1), readout(x, prefix[:, :1]))


def test_project_readout_is_gelu_linear_of_token_and_cls(level):
    x, prefix = level
    readout = Readout('project', 8, ['cls', 'dist'])
    linear = readout.project[0]
    token = x[:, :, 1, 2]  # b c at row 1, column 2
    expected = F.gelu(linear(torch.cat([token, prefix[:, 0]], dim=-1)))
    torch.testing.assert_close(readout(x, prefix)[:, :, 1, 2], expected)
    changed = prefix.clone()
    changed[:, 1] += 5  # the distillation token does not enter a 'project' readout
    torch.testing.assert_close(readout(x, changed), readout(x, prefix))


def test_readouts_without_cls_are_refused():
    with pytest.raises(ValueError, match="needs a CLS token.*\\['reg0'\\]"):
        Readout('project', 8, ['reg0'])
    with pytest.raises(ValueError, match='readout must be one of'):
        Readout('concat', 8, ['cls'])


@pytest.mark.parametrize('factor,size', [(4, (12, 20)), (2, (6, 10)), (1, (3, 5)), (0.5, (2, 3))])
def test_resample_factors_give_the_target_grid(factor, size, level):
    x, prefix = level
    out = ReassembleLevel(8, 4, factor, 'ignore')(x)
    assert out.shape == (2, 4, *size)


def test_resample_factors_move_pixels_as_they_should():
    x = torch.randn(1, 4, 3, 5)
    up = ReassembleLevel(4, 4, 2, 'ignore')
    down = ReassembleLevel(4, 4, 0.5, 'ignore')
    same = ReassembleLevel(4, 4, 1, 'ignore')
    with torch.no_grad():
        for level in (up, down, same):
            level.proj.weight.copy_(torch.eye(4)[:, :, None, None])
            level.proj.bias.zero_()
        up.resample.weight.copy_(torch.eye(4)[:, :, None, None].expand(4, 4, 2, 2))  # each pixel -> a 2x2 block
        up.resample.bias.zero_()
        down.resample.weight.zero_()
        down.resample.weight[:, :, 1, 1] = torch.eye(4)  # centre tap: keeps every other pixel
        down.resample.bias.zero_()
        torch.testing.assert_close(up(x), x.repeat_interleave(2, -1).repeat_interleave(2, -2))
        torch.testing.assert_close(down(x), x[..., ::2, ::2])
        torch.testing.assert_close(same(x), x)


def test_fusion_block_formula():
    block = FusionBlock(4).eval()
    x, skip = torch.randn(1, 4, 3, 5), torch.randn(1, 4, 6, 10)
    resized = F.interpolate(skip, size=(3, 5), mode='bilinear', align_corners=False)
    y = block.res2(x + block.res1(resized))
    expected = block.proj(F.interpolate(y, scale_factor=2, mode='bilinear', align_corners=True))
    torch.testing.assert_close(block(x, skip), expected)
    rcu = block.res1
    manual = resized + rcu.conv2(F.relu(rcu.conv1(F.relu(resized))))
    torch.testing.assert_close(rcu(resized), manual)


def test_neck_takes_token_and_hierarchical_backbones():
    tokens = DPTNeck([32] * 4, [16] * 4, ['cls'], hidden_channels=(8, 16, 32, 32), fusion_channels=16)
    assert tokens.factors == [4, 2, 1, 0.5]
    outs = tokens([torch.randn(1, 32, 5, 7)] * 4, [torch.randn(1, 1, 32)] * 4)
    # an odd grid (5x7) goes to 3x4 at x0.5; fusion follows the deepest map, skips are resized to it (as DPT)
    assert [tuple(o.shape[-2:]) for o in outs] == [(6, 8), (12, 16), (24, 32), (48, 64)]
    pyramid = DPTNeck([8, 16, 32, 64], [4, 8, 16, 32], hidden_channels=(8, 16, 32, 32), fusion_channels=16)
    assert pyramid.factors == [1, 1, 1, 1] and pyramid.reassemble[0].readout.mode == 'ignore'
    outs = pyramid([torch.randn(1, 8, 40, 56), torch.randn(1, 16, 20, 28), torch.randn(1, 32, 10, 14),
                    torch.randn(1, 64, 5, 7)])
    assert [tuple(o.shape[-2:]) for o in outs] == [(10, 14), (20, 28), (40, 56), (80, 112)]
    with pytest.raises(ValueError, match='factor 3.0 is not a power of two'):
        DPTNeck([8] * 4, [12, 8, 16, 32])


def test_heads_shapes_and_depth_head_stays_float32_under_autocast():
    x = torch.randn(2, 16, 6, 8)
    assert DPTSegHead(5, 16)(x).shape == (2, 5, 12, 16)
    assert DPTSegHead(5, 16, upsample=False)(x).shape == (2, 5, 6, 8)
    head = DPTDepthHead(16, mode='metric', max_depth=10.0)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        depth = head(x.bfloat16())
    assert depth.dtype == torch.float32 and depth.shape == (2, 1, 12, 16)
    assert (depth > 0).all() and (depth < 10).all()
    torch.testing.assert_close(depth, head(x.bfloat16().float()))


def test_head_dropout_keeps_with_probability_1_minus_p_and_rescales():
    from zoo.core import Dropout
    drop = Dropout(0.25).train()
    x = torch.ones(200, 500, requires_grad=True)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.01
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.75))
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)
    assert torch.equal(drop.eval()(x), x)
