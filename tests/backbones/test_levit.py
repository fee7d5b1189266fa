"""LeViT against timm: logits at 224 (linear and 1x1-conv layouts, BN statistics perturbed), training-mode outputs
(unfolded BNs), other sizes (offset-bias tables resampled as timm resizes checkpoints), the cached bias, size and
cost."""
import pytest
import torch

import zoo
from zoo.core import LinearBN
from zoo.profiling import count_macs, count_params

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')


def levit_reference(name: str, **kwargs) -> torch.nn.Module:
    """timm's model with every parameter perturbed and BN statistics and attention biases far from their init."""
    ref = timm_reference(name, **kwargs)
    with torch.no_grad():
        for m in ref.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.weight.normal_(1.0, 0.2)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
            if hasattr(m, 'attention_biases'):
                m.attention_biases.normal_(0.0, 0.5)
    return ref.eval()


@pytest.mark.parametrize('name', ['levit_128s', 'levit_256', 'levit_conv_128s'])
def test_logits_match_timm_at_224(name, tmp_path):
    torch.manual_seed(0)
    ref = levit_reference(name)
    ours = zoo.create_classifier(name, pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        diff = (ours(x) - ref(x)).abs().max().item()
    assert diff <= 1e-4, f"{name}: max abs diff {diff}"


def test_training_mode_uses_batch_statistics_as_timm(tmp_path):
    """In training the BNs are not folded: the logits (both heads) and the updated running statistics equal timm's.

    In float64: with batch statistics of two images the fp32 logits of either model lie ~1.5e-4 from the exact
    ones (each model against its own float64 copy), so in fp32 two correct models can differ by ~3e-4 when their
    convolutions sum in another order (ours runs the stem channels-last); in float64 they agree to ~1e-13."""
    torch.manual_seed(0)
    ref = levit_reference('levit_128s')
    ours = zoo.create_classifier('levit_128s', pretrained=save_safetensors(ref, tmp_path / 'w.safetensors'))
    ours.train().double(), ref.train().double()
    ref.set_distilled_training(True)
    x = torch.randn(2, 3, 224, 224, dtype=torch.float64)  # timm runs at its build size only
    cls, dist = ours(x)
    ref_cls, ref_dist = ref(x)
    torch.testing.assert_close(cls, ref_cls, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(dist, ref_dist, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(ours.stages[1].downsample.attn.qkv.kv.norm.running_mean.sort().values,
                               ref.stages[1].downsample.attn_downsample.kv.bn.running_mean.sort().values)
    (cls.sum() + dist.sum()).backward()
    assert ours.stages[2].blocks[0].attn.pos_bias.table.grad.abs().sum() > 0
    assert ours.stages[1].downsample.attn.pos_bias.table.grad.abs().sum() > 0


def test_other_size_equals_timm_built_for_it_with_resized_tables(tmp_path):
    """Our 224 model at 288 (18x18 tokens, then 9x9, 5x5) computes what timm builds for 288 with each bias table
    resized by timm's own LeViT rule (bicubic, antialiased)."""
    from timm.layers import resize_rel_pos_bias_table_levit
    torch.manual_seed(0)
    ref = levit_reference('levit_128s')
    ours = zoo.create_classifier('levit_128s', pretrained=save_safetensors(ref, tmp_path / 'w.safetensors')).eval()
    ref_288 = timm.create_model('levit_128s', img_size=288).eval()
    target = ref_288.state_dict()
    state = {k: (resize_rel_pos_bias_table_levit(v.T, target[k].T.shape).T if k.endswith('attention_biases') else v)
             for k, v in ref.state_dict().items()}
    ref_288.load_state_dict(state)
    x = torch.randn(1, 3, 288, 288)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref_288(x), atol=1e-4, rtol=1e-4)


def test_non_square_backbone_runs_at_the_contract_strides():
    assert zoo.create_backbone('levit_128s').out_strides == [16, 16, 32, 64]  # default: DPT's four levels
    backbone = zoo.create_backbone('levit_128s', out_indices=(0, 1, 2)).eval()
    assert backbone.out_strides == [16, 32, 64] and backbone.input_multiple == 64
    with torch.no_grad():
        maps = backbone(torch.randn(1, 3, 192, 320))
        odd = backbone(torch.randn(1, 3, 100, 150))  # not a multiple: ceil at every stride-2 step
    assert [tuple(m.shape[1:]) for m in maps] == [(128, 12, 20), (256, 6, 10), (384, 3, 5)]
    assert [tuple(m.shape[-2:]) for m in odd] == [(7, 10), (4, 5), (2, 3)]
    assert all(torch.isfinite(m).all() for m in maps + odd)


def test_eval_gathers_each_bias_once_per_grid_and_folds_the_bns():
    model = zoo.create_classifier('levit_128s', depths=(1, 1, 1)).eval()
    bias = model.stages[1].downsample.attn.pos_bias
    x = torch.randn(1, 3, 128, 128)
    with torch.no_grad():
        model(x)
        first = bias._cached[1]
        model(x)
        assert bias._cached[1] is first  # no second gather
    assert first.shape == (8, 4 * 4, 8 * 8)  # heads, strided queries (ceil(8/2))^2, keys 8x8
    layer = model.stages[0].blocks[0].mlp.ln1
    assert isinstance(layer, LinearBN)
    with torch.no_grad():
        layer.norm.running_var.uniform_(0.5, 1.5)
        tokens = torch.randn(2, 5, layer.linear.in_features)
        folded = layer(tokens)
        bn = layer.norm
        written_out = (layer.linear(tokens) - bn.running_mean) / (bn.running_var + bn.eps).sqrt() * bn.weight + bn.bias
    torch.testing.assert_close(folded, written_out, atol=1e-5, rtol=1e-5)


def test_folded_linear_follows_statistics_changed_in_place_and_tensors_replaced():
    """The kept fold is redone when a tensor it was folded from changes: a running statistic updated in place, a
    weight replaced by a new Parameter; unchanged, the same folded tensors are reused."""
    torch.manual_seed(0)
    layer = LinearBN(6, 4).eval()
    tokens = torch.randn(2, 3, 6)

    def written_out():
        bn = layer.norm
        return (layer.linear(tokens) - bn.running_mean) / (bn.running_var + bn.eps).sqrt() * bn.weight + bn.bias

    with torch.no_grad():
        layer(tokens)
        kept = layer.cached_folded()
        assert layer.cached_folded()[0] is kept[0]
        layer.norm.running_var.uniform_(0.5, 1.5)
        torch.testing.assert_close(layer(tokens), written_out(), atol=1e-5, rtol=1e-5)
        layer.linear.weight = torch.nn.Parameter(torch.randn(4, 6))
        torch.testing.assert_close(layer(tokens), written_out(), atol=1e-5, rtol=1e-5)
        layer.norm.bias.add_(1.0)
        torch.testing.assert_close(layer(tokens), written_out(), atol=1e-5, rtol=1e-5)


def test_stem_map_is_the_first_stage_tokens_without_a_copy():
    """The stem runs channels-last, so its 'b d h w' map is already the tokens 'b (h w) d' the stages read."""
    model = zoo.create_classifier('levit_128s', depths=(1, 1, 1)).eval()
    seen = {}
    model.stem.register_forward_hook(lambda m, args, out: seen.update(stem=out))
    model.stages[0].register_forward_pre_hook(lambda m, args: seen.update(tokens=args[0]))
    with torch.no_grad():
        model(torch.randn(2, 3, 64, 96))
    assert seen['tokens'].shape == (2, 4 * 6, 128)
    assert seen['tokens'].data_ptr() == seen['stem'].data_ptr()


@pytest.mark.parametrize('name, params, gmacs', [('levit_128s', 7.8, 0.30), ('levit_256', 18.9, 1.13)])
def test_size_and_cost_equal_timm_and_the_paper(name, params, gmacs):
    ours = zoo.create_classifier(name).eval()
    ref = timm.create_model(name).eval().requires_grad_(False)
    assert count_params(ours) == count_params(ref)
    assert round(count_params(ours) / 1e6, 1) == params
    x = torch.randn(1, 3, 224, 224)
    macs = count_macs(ours, x)
    assert abs(macs - count_macs(ref, x)) / macs <= 0.01
    assert round(macs / 1e9, 2) == gmacs  # paper: 305 M and 1120 M FLOPs (multiply-adds)


@pytest.mark.parametrize('name', ['levit_128', 'levit_192', 'levit_384'])
def test_parameter_count_equals_timm(name):
    assert count_params(zoo.create_classifier(name)) == count_params(timm.create_model(name))


def test_dpt_configs_differ_from_vit_only_in_the_backbone_for_the_compare_tool():
    from mmengine.config import Config

    from lab.benchmark.compare import check_only_backbones_differ
    root = 'configs/'
    configs = {name: Config.fromfile(root + name) for name in
               ('dpt_vitb_ade20k_ours.py', 'dpt_pits_ade20k.py', 'dpt_levit256_ade20k.py')}
    check_only_backbones_differ(configs)  # raises naming any other differing key
    assert [c.model.backbone.name for c in configs.values()] == ['vit_base_patch16_224', 'pit_s_224', 'levit_256']


def test_detection_pyramid_takes_the_levit_levels():
    from heads.detection import PyramidBackbone
    backbone = PyramidBackbone('levit_256', out_channels=32, depths=(1, 1, 1)).eval()
    assert backbone.out_strides == [16, 32, 64, 128]  # stages 16/32/64 and the pooled level
    with torch.no_grad():
        maps = backbone(torch.randn(1, 3, 256, 384))
    assert [tuple(m.shape) for m in maps] == [(1, 32, 256 // s, 384 // s) for s in (16, 32, 64, 128)]
