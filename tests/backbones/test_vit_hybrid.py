"""ViT-hybrid (BiT ResNet + ViT) against timm's vit_base_r50_s16_*: logits, stage and block taps, checkpoint keys."""
import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.core.std_conv import StdConv2d, same_padding

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')

SMALL = dict(img_size=64, embed_dim=64, depth=3, num_heads=2)  # the full R50 stem (3, 4, 9), a small ViT


@pytest.mark.slow
def test_classifier_and_taps_equal_timm(tmp_path):
    ref = timm_reference('vit_base_r50_s16_224', num_classes=7, dynamic_img_size=True, **SMALL)
    weights = save_safetensors(ref, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier('vit_base_r50_s16_224', pretrained=weights, num_classes=7, **SMALL).eval()
    backbone = zoo.create_backbone('vit_base_r50_s16_224', pretrained=weights, out_indices=(0, 1, 4, 5),
                                   **SMALL).eval()
    assert backbone.out_strides == [4, 8, 16, 16] and backbone.out_channels == [256, 512, 64, 64]
    assert backbone.prefix_taps == [False, False, True, True] and len(backbone.blocks) == 3
    with torch.no_grad():
        for hw in ((64, 64), (70, 50)):  # 70x50: 'SAME' padding that differs per side and per layer
            x = torch.randn(2, 3, *hw)
            diff = (ours(x) - ref(x)).abs().max().item()
            assert diff <= 1e-4, f"logits at {hw}: max abs diff {diff}"
        x = torch.randn(2, 3, 64, 96)
        maps, prefix = backbone.forward_taps(x)
        resnet = ref.patch_embed.backbone
        stage0 = resnet.stages[0](resnet.stem(x))
        expected = [stage0, resnet.stages[1](stage0)]
        blocks = ref.forward_intermediates(x, indices=[1, 2], norm=False, output_fmt='NCHW', intermediates_only=True,
                                           return_prefix_tokens=True)
        expected += [m for m, _ in blocks]
    assert [tuple(m.shape[1:]) for m in maps] == [(256, 16, 24), (512, 8, 12), (64, 4, 6), (64, 4, 6)]
    for got, want in zip(maps, expected):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert prefix[:2] == [None, None]
    for got, (_, want) in zip(prefix[2:], blocks):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_registered_name_has_timms_parameters(name='vit_base_r50_s16_384'):  # the 224 one differs in img_size
    with torch.device('meta'):
        ref = timm.create_model(name, num_classes=1000)
        ours = zoo.create_classifier(name)
    theirs = {k.replace('cls_token', 'prefix.cls').replace('pos_embed', 'pos_embed.weight'): v.shape
              for k, v in ref.state_dict().items()}
    assert theirs == {k: v.shape for k, v in ours.state_dict().items()}


def test_weight_standardised_same_conv_follows_the_formulas():
    # TensorFlow 'SAME': out = ceil(in / s), total pad (out - 1) s + k - in, the odd pixel after
    assert [same_padding(n, 3, 2) for n in (7, 8)] == [(1, 1), (0, 1)]
    assert same_padding(9, 7, 2) == (3, 3) and same_padding(10, 7, 2) == (2, 3)
    conv = StdConv2d(4, 6, 3, stride=2, eps=1e-8)
    with torch.no_grad():
        conv.weight.normal_(0.3, 2.0)
    w = conv.weight
    mean, var = w.mean((1, 2, 3), keepdim=True), w.var((1, 2, 3), unbiased=False, keepdim=True)
    x = torch.randn(1, 4, 8, 9)
    expected = F.conv2d(F.pad(x, (1, 1, 0, 1)), (w - mean) / (var + 1e-8).sqrt(), stride=2)
    torch.testing.assert_close(conv(x), expected)
    assert conv(x).shape[-2:] == (4, 5)


def test_same_padding_equals_timms_at_every_size():
    from timm.layers.padding import get_same_padding
    for size in range(1, 40):
        for kernel, stride, dilation in [(k, s, d) for k in (1, 2, 3, 4, 7) for s in (1, 2, 3, 4) for d in (1, 2)]:
            total = get_same_padding(size, kernel, stride, dilation)
            assert same_padding(size, kernel, stride, dilation) == (total // 2, total - total // 2), \
                (size, kernel, stride, dilation)


def test_same_padding_of_a_symbolic_size_stays_a_floor_division_chain():
    """Traced at a symbolic multiple of 16, the stem and three strided 'SAME' layers give the size / 16 exactly
    (with ceil and max the sizes nested into terms sympy cannot simplify and the export took minutes)."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv, is_concrete_int
    env = ShapeEnv()
    k = env.create_symintnode(env.create_symbol(5, ConstantSource('k')), hint=5)
    size = 16 * k
    for kernel in (7, 3, 3, 3):  # stem conv, max pool, stage 2 and 3's strided 3x3 convs
        top, bottom = same_padding(size, kernel, 2)
        assert is_concrete_int(top) and is_concrete_int(bottom)  # constants, no nested size term
        size = (size + top + bottom - kernel) // 2 + 1
    assert size.node.expr == k.node.expr and same_padding(16 * k, 1, 2) == (0, 0) and not env.guards


def test_bad_options_are_refused_clearly():
    with pytest.raises(TypeError, match='no patch_size option'):
        zoo.create_backbone('vit_base_r50_s16_224', patch_size=8)
    with pytest.raises(ValueError, match='divisible by num_groups'):
        zoo.create_backbone('vit_base_r50_s16_224', channels=(256, 512, 1000), **SMALL)
