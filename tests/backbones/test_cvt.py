"""CvT against transformers: logits, stage maps, weight layouts, published size/cost, dense use in DPT."""
import pytest
import torch
from mmengine.structures import BaseDataElement, PixelData

import zoo
from zoo.core import ConvBN, ConvQKV
from zoo.profiling import count_macs, count_params

from ..reference import perturb_, tiny_dpt

transformers = pytest.importorskip('transformers')

# transformers' CvtConfig per size (published CvT-13/21/W24 hyper-parameters)
HF_SIZES = {
    '13': dict(embed_dim=[64, 192, 384], num_heads=[1, 3, 6], depth=[1, 2, 10]),
    '21': dict(embed_dim=[64, 192, 384], num_heads=[1, 3, 6], depth=[1, 4, 16]),
    'w24': dict(embed_dim=[192, 768, 1024], num_heads=[3, 12, 16], depth=[2, 2, 20]),
}
TINY = dict(embed_dim=[16, 32, 64], num_heads=[1, 2, 4], depth=[1, 2, 3])  # transformers needs depth[i] > i


def hf_cvt(folder, cls=None, **config):
    """A transformers CvT with noisy weights and non-trivial BatchNorm statistics, saved to ``folder``."""
    torch.manual_seed(0)
    model = (cls or transformers.CvtForImageClassification)(transformers.CvtConfig(num_labels=1000, **config))
    perturb_(model)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_(0.0, 0.2)
            m.running_var.uniform_(0.5, 2.0)
    model.eval().save_pretrained(folder)
    return model


def ours_kwargs(config: dict) -> dict:
    return dict(embed_dims=tuple(config['embed_dim']), num_heads=tuple(config['num_heads']),
                depths=tuple(config['depth']))


@pytest.mark.slow
@pytest.mark.parametrize('name,config', [
    ('cvt_13_224', HF_SIZES['13']),
    pytest.param('cvt_21_224', HF_SIZES['21'], marks=pytest.mark.slow),  # ~30 s on 2 cores
    ('cvt_w24_384', dict(HF_SIZES['w24'], depth=[1, 2, 3])),  # full widths and heads, fewer blocks (HF needs >= 3)
])
def test_logits_match_transformers_at_224_and_non_square(name, config, tmp_path):
    ref = hf_cvt(tmp_path, **config)
    ours = zoo.create_classifier(name, pretrained=tmp_path, **ours_kwargs(config)).eval()
    with torch.no_grad():
        for hw in ((224, 224), (224, 288)):
            x = torch.randn(1, 3, *hw)
            diff = (ours(x) - ref(pixel_values=x).logits).abs().max().item()
            assert diff <= 1e-4, f"{name} at {hw}: max abs diff {diff}"


def test_backbone_maps_match_transformers_stage_outputs_from_classifier_and_model_checkpoints(tmp_path):
    x = torch.randn(2, 3, 96, 160)
    for cls in (transformers.CvtForImageClassification, transformers.CvtModel):
        ref = hf_cvt(tmp_path / cls.__name__, cls=cls, **TINY)
        backbone = zoo.create_backbone('cvt_13_224', pretrained=tmp_path / cls.__name__, **ours_kwargs(TINY)).eval()
        with torch.no_grad():
            maps = backbone(x)
            core = ref.cvt if hasattr(ref, 'cvt') else ref
            out = core(pixel_values=x, output_hidden_states=True)
        expected = list(out.hidden_states) + [out.hidden_states[-1]]
        assert [m.shape for m in maps] == [e.shape for e in expected]
        for ours_map, ref_map in zip(maps, expected):
            torch.testing.assert_close(ours_map, ref_map, atol=1e-4, rtol=1e-4)


def to_official(state: dict) -> dict:
    """Our keys in microsoft/CvT's layout (lib/models/cls_cvt.py), written out by hand."""
    out = {}
    for key, value in state.items():
        key = key.replace('stages.', 'stage', 1).replace('.prefix.cls', '.cls_token')
        for x in 'qkv':
            key = key.replace(f'.attn.qkv.conv_{x}.norm.', f'.attn.conv_proj_{x}.bn.')
            key = key.replace(f'.attn.qkv.conv_{x}.conv.', f'.attn.conv_proj_{x}.conv.')
            key = key.replace(f'.attn.qkv.{x}.', f'.attn.proj_{x}.')
        out[key] = value
    return out


def test_official_layout_is_detected_and_loads():
    source = zoo.create_classifier('cvt_13_224', **ours_kwargs(TINY))
    perturb_(source).eval()
    official = to_official(source.state_dict())
    for key in ('stage0.patch_embed.proj.weight', 'stage2.cls_token', 'stage0.blocks.0.attn.conv_proj_q.conv.weight',
                'stage0.blocks.0.attn.conv_proj_k.bn.running_var', 'stage1.blocks.0.attn.proj_v.weight',
                'stage2.blocks.1.attn.proj.weight', 'stage2.blocks.1.mlp.fc2.bias', 'norm.weight', 'head.weight'):
        assert key in official
    ours = zoo.create_classifier('cvt_13_224', **ours_kwargs(TINY)).eval()
    assert zoo.load_pretrained(ours, official).format == 'official'
    x = torch.randn(1, 3, 64, 80)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), source(x))
    backbone = zoo.create_backbone('cvt_13_224', pretrained=official, **ours_kwargs(TINY))
    assert len(backbone(x)) == 4


@pytest.mark.slow
@pytest.mark.parametrize('name,params_m,gmacs', [('cvt_13_224', 20, 4.5), ('cvt_21_224', 32, 7.1)])
def test_params_and_macs_match_published_figures(name, params_m, gmacs):
    model = zoo.create_classifier(name).eval()
    assert count_params(model) / 1e6 == pytest.approx(params_m, rel=0.02)
    assert count_macs(model, torch.randn(1, 3, 224, 224)) / 1e9 == pytest.approx(gmacs, rel=0.02)


def test_backbone_levels_for_a_non_square_input():
    backbone = zoo.create_backbone('cvt_13_224', depths=(1, 1, 1))
    assert backbone.out_strides == [4, 8, 16, 16] and backbone.out_channels == [64, 192, 384, 384]
    maps = backbone(torch.randn(1, 3, 96, 160))
    assert [tuple(m.shape) for m in maps] == [(1, 64, 24, 40), (1, 192, 12, 20), (1, 384, 6, 10), (1, 384, 6, 10)]
    two = zoo.create_backbone('cvt_13_224', out_indices=(0, 1), depths=(1, 1, 1))
    assert len(two.stages) == 2 and two.out_strides == [4, 8]


def test_tiny_dpt_segmentor_on_cvt_runs_forward_and_backward():
    import heads
    backbone = dict(type='ZooBackbone', name='cvt_13_224', **ours_kwargs(TINY))
    model = heads.MODELS.build(tiny_dpt('seg', backbone=backbone))
    assert model.neck.factors == [1, 1, 1, 0.5]
    x = torch.randn(2, 3, 64, 96)
    labels = torch.randint(0, 11, (2, 64, 96))
    samples = [BaseDataElement(gt_sem_seg=PixelData(data=label[None])) for label in labels]
    losses = model(x, samples, mode='loss')
    sum(losses.values()).backward()
    assert model(x, mode='tensor').shape == (2, 11, 64, 96)
    qkv = model.backbone.stages[0].blocks[0].attn.qkv
    assert qkv.conv_k.conv.weight.grad.abs().sum() > 0 and qkv.conv_k.norm.weight.grad.abs().sum() > 0


def test_conv_qkv_prefix_tokens_skip_the_convs():
    qkv = ConvQKV(8, num_prefix=1)
    perturb_(qkv, std=0.5).eval()
    x = torch.randn(2, 1 + 4 * 6, 8)
    q, k, v = qkv(x, grid=(4, 6))
    assert q.shape == (2, 1 + 24, 8) and k.shape == v.shape == (2, 1 + 2 * 3, 8)
    torch.testing.assert_close(k[:, 0], qkv.k(x[:, 0]))  # the CLS row is the Linear of the CLS token alone
    grid = x[:, 1:].transpose(1, 2).reshape(2, 8, 4, 6)
    conv = qkv.conv_v.norm(qkv.conv_v.conv(grid)).flatten(2).transpose(1, 2)  # unfused conv -> BN
    torch.testing.assert_close(v[:, 1:], qkv.v(conv), atol=1e-5, rtol=1e-5)


def test_conv_bn_folds_in_eval_and_trains_unfused():
    layer = ConvBN(6, kernel_size=3, stride=2, depthwise=True)
    layer.norm.running_mean.normal_()
    layer.norm.running_var.uniform_(0.5, 2)
    perturb_(layer, std=0.3)
    x = torch.randn(2, 6, 9, 7)
    layer.eval()
    expected = layer.norm(layer.conv(x))
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)
    layer.train()
    torch.testing.assert_close(layer(x), torch.nn.functional.batch_norm(
        layer.conv(x), None, None, layer.norm.weight, layer.norm.bias, training=True))


def test_benchmark_reference_for_cvt_is_transformers_with_our_sizes():
    from lab.benchmark.reference import reference_model
    ref = reference_model('cvt_13_224')
    assert type(ref).__name__ == 'CvtForImageClassification' and list(ref.config.depth) == [1, 2, 10]
    with torch.device('meta'):
        assert count_params(zoo.create_classifier('cvt_13_224')) == count_params(ref)
