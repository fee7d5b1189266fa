"""Depth Anything as our DepthEstimator: transformers' DepthAnythingForDepthEstimation folders and the official
Depth Anything V2 layout load to the same predicted depth, at the configured size and a non-square one."""
import re

import pytest
import torch

import heads
import zoo
from heads.hf.config import HFConfigError
from heads.hf.depth_anything import depth_anything_config_from_hf
from heads.models.depth_anything import load_official_depth_anything

from ..reference import perturb_

transformers = pytest.importorskip('transformers')

# 5 blocks, taps after blocks 1-4 (stages 2..5): the embeddings-free taps and a dropped first block are exercised
BACKBONE = dict(hidden_size=64, num_hidden_layers=5, num_attention_heads=4, image_size=98, patch_size=14,
                out_indices=[2, 3, 4, 5], reshape_hidden_states=False, layerscale_value=0.5)
HEAD = dict(reassemble_hidden_size=64, neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32, head_hidden_size=16)


def save_hf(tmp_path, **overrides):
    config = transformers.DepthAnythingConfig(backbone_config=transformers.Dinov2Config(**BACKBONE), **HEAD,
                                              **overrides)
    model = perturb_(transformers.DepthAnythingForDepthEstimation(config)).eval()
    perturb_(model.neck, 0.1), perturb_(model.head, 0.2)  # at init std 0.02 the depth hardly varies over the image
    with torch.no_grad():  # the last conv's bias above zero so that the relative head's ReLU passes most pixels
        model.head.conv3.bias.fill_(0.5)
    model.save_pretrained(tmp_path)
    return model


def assert_same_depth(ours, reference, size):
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        expected = reference(pixel_values=x).predicted_depth
        got = ours(x, mode='tensor')
    assert got.shape == (1, 1, *size) and expected.shape == (1, *size)
    scale = expected.abs().max()
    assert expected.std() > 0.01 * scale
    assert (got[:, 0] - expected).abs().max() <= 1e-4 * scale, size


@pytest.mark.parametrize('overrides', [{}, dict(depth_estimation_type='metric', max_depth=20)])
def test_transformers_folder_predicts_the_same_depth(overrides, tmp_path):
    reference = save_hf(tmp_path, **overrides)
    ours = heads.from_pretrained_hf(tmp_path)
    assert isinstance(ours, heads.DepthEstimator) and ours.decode_head.mode == reference.config.depth_estimation_type
    assert len(ours.backbone.blocks) == 5 and ours.backbone.tap_norm
    for size in ((98, 98), (84, 126)):  # grids 7x7 (levels 28, 14, 7, 4) and 6x9 (deepest 3x5)
        assert_same_depth(ours, reference, size)


def official_state(reference) -> dict:
    """transformers' Depth Anything weights in the official Depth Anything V2 layout (its DPTHead and DINOv2 names)."""
    rules = [(r'^backbone\.embeddings\.(cls|mask)_token$', r'pretrained.\1_token'),
             (r'^backbone\.embeddings\.position_embeddings$', 'pretrained.pos_embed'),
             (r'^backbone\.embeddings\.patch_embeddings\.projection\.', 'pretrained.patch_embed.proj.'),
             (r'^backbone\.encoder\.layer\.', 'pretrained.blocks.'), (r'\.layer_scale(\d)\.lambda1$', r'.ls\1.gamma'),
             (r'\.attention\.output\.dense\.', '.attn.proj.'), (r'^backbone\.layernorm\.', 'pretrained.norm.'),
             (r'^neck\.reassemble_stage\.layers\.(\d)\.projection\.', r'depth_head.projects.\1.'),
             (r'^neck\.reassemble_stage\.layers\.(\d)\.resize\.', r'depth_head.resize_layers.\1.'),
             (r'^neck\.convs\.(\d)\.', lambda m: f'depth_head.scratch.layer{int(m[1]) + 1}_rn.'),
             (r'^neck\.fusion_stage\.layers\.(\d)\.', lambda m: f'depth_head.scratch.refinenet{4 - int(m[1])}.'),
             (r'\.residual_layer(\d)\.convolution(\d)\.', r'.resConfUnit\1.conv\2.'), (r'\.projection\.', '.out_conv.'),
             (r'^head\.conv1\.', 'depth_head.scratch.output_conv1.'),
             (r'^head\.conv2\.', 'depth_head.scratch.output_conv2.0.'),
             (r'^head\.conv3\.', 'depth_head.scratch.output_conv2.2.')]
    out, qkv = {}, {}
    for key, value in reference.state_dict().items():
        for pattern, repl in rules:
            key = re.sub(pattern, repl, key)
        match = re.match(r'^(pretrained\.blocks\.\d+)\.attention\.(q|k|v)_proj\.(weight|bias)$', key)
        if match:
            qkv.setdefault((match[1], match[3]), {})[match[2]] = value
        else:
            out[key.replace('.attention.o_proj.', '.attn.proj.')] = value
    for (block, kind), parts in qkv.items():
        out[f'{block}.attn.qkv.{kind}'] = torch.cat([parts['q'], parts['k'], parts['v']])
    return out


def test_official_layout_loads_to_the_same_depth(tmp_path):
    reference = save_hf(tmp_path)
    config = depth_anything_config_from_hf(reference.config.to_dict())
    config['backbone']['pos_interp'] = 'dinov2'  # the official resampling; at the build size the table is used as is
    ours = heads.MODELS.build(config).eval()
    torch.save(official_state(reference), tmp_path / 'depth_anything_v2_small.pth')
    report = load_official_depth_anything(ours, tmp_path / 'depth_anything_v2_small.pth')
    assert not report.missing and not report.unexpected
    assert_same_depth(ours, reference, (98, 98))
    # the checkpoint's encoder alone, as a backbone's pretrained weights (how fine-tuning configs start from it)
    args = {k: v for k, v in config['backbone'].items() if k not in ('type', 'name')}
    encoder = zoo.create_backbone('vit_small_patch14_dinov2', pretrained=tmp_path / 'depth_anything_v2_small.pth',
                                  **args).eval()
    x = torch.randn(1, 3, 70, 84)
    with torch.no_grad():
        for got, expected in zip(encoder(x), ours.backbone(x)):
            torch.testing.assert_close(got, expected)


def test_foreign_backbones_and_bad_fields_are_refused_clearly(tmp_path):
    config = transformers.DepthAnythingConfig(backbone_config=transformers.Dinov2Config(**BACKBONE), **HEAD).to_dict()
    with pytest.raises(HFConfigError, match='DINOv2 backbone'):
        depth_anything_config_from_hf({**config, 'backbone_config': {'model_type': 'swin'}})
    with pytest.raises(HFConfigError, match='depth_estimation_type'):
        depth_anything_config_from_hf({**config, 'depth_estimation_type': 'absolute'})


def test_benchmark_tool_times_depth_anything_v2_small_against_transformers(tmp_path, monkeypatch):
    """... and records the row (series benchmark.depth_anything) with every round of both sides."""
    import benchmark  # tools/ (on the path by pyproject.toml's pytest pythonpath)

    from lab.benchmark.depth_anything import COLUMNS

    from ..tools.records import assert_printed, own_store, series_records
    folder = own_store(monkeypatch, tmp_path)
    out = tmp_path / 'da.md'
    (row,) = benchmark.main(['--depth-anything', 'vits', '--size', '56', '--iters', '2', '--out', str(out)])
    assert row['max_abs_diff'] <= 1e-4 and row['ours_s'] > 0 and row['hf_s'] > 0
    assert row['ours_peak_MiB'] > 0 and row['memory_ratio'] == row['ours_peak_MiB'] / row['hf_peak_MiB']
    (entry,) = series_records(folder, 'benchmark.depth_anything')
    assert entry['settings'] == {'model': 'Depth Anything V2 vits', 'batch': 1, 'size': '56x56', 'dtype': 'fp32',
                                 'reference': 'transformers'}
    assert {k: len(v) for k, v in entry['rounds'].items()} == {'ours': 2, 'reference': 2}
    cells = dict(zip(COLUMNS, out.read_text().splitlines()[-1].strip('| ').split(' | ')))
    assert_printed(entry, {k: cells[k] for k in ('ours_s', 'hf_s', 'time_ratio', 'memory_ratio')})


def test_seven_scenes_config_trains_metric_depth_into_every_part():
    """The fine-tuning config's model (shrunk encoder): SiLog loss on metric depth, gradients reach the encoder, the
    neck and the head, and padded (invalid, depth 0) pixels are left out."""
    from mmengine.config import Config
    from mmengine.structures import BaseDataElement, PixelData
    cfg = Config.fromfile('configs/depth_anything_v2_vits_7scenes.py').model
    cfg.backbone.update(depth=3, out_indices=(0, 1, 2), embed_dim=48, num_heads=2)
    cfg.neck.update(hidden_channels=(8, 16, 32), reassemble_factors=(4, 2, 1))
    model = heads.MODELS.build(cfg)
    assert model.decode_head.mode == 'metric' and model.decode_head.max_depth == 10.0
    depth = torch.rand(2, 56, 70) * 4 + 0.5
    depth[:, -14:] = 0  # as padding would be
    samples = [BaseDataElement(gt_depth=PixelData(data=d[None])) for d in depth]
    loss = model(torch.randn(2, 3, 56, 70), samples, mode='loss')['loss_depth']
    loss.backward()
    assert torch.isfinite(loss) and type(model.loss_fn).__name__ == 'SiLogLoss'
    for part in (model.backbone.blocks[0], model.neck.fusion[-1], model.decode_head.conv3):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())


@pytest.mark.parametrize('mode', ['relative', 'metric'])
def test_head_in_row_strips_equals_the_whole_map(monkeypatch, mode):
    """Inference runs the full-size convolutions a strip of rows at a time (strips of 7 rows here: the last one
    short, halos at both image borders); training runs them whole. Both give the same depth."""
    from heads.decode_heads import depth_anything as module
    monkeypatch.setattr(module, 'STRIP_ROWS', 7)
    torch.manual_seed(0)
    head = module.DepthAnythingHead(16, 8, mode=mode, max_depth=20.0).eval()
    x = torch.randn(2, 16, 11, 9)
    with torch.no_grad():
        strips = head(x)
    whole = head(x.requires_grad_())
    assert strips.shape == whole.shape == (2, 1, 19, 16)
    torch.testing.assert_close(strips, whole.detach(), rtol=1e-5, atol=1e-5)
    assert module.row_strips(19, 7) == [(0, 7), (7, 14), (14, 19)]
