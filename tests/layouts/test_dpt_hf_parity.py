"""Our DPT models built from transformers' DPT checkpoints give transformers' outputs."""
import pytest
import torch

import heads

from ..reference import perturb_

transformers = pytest.importorskip('transformers')

SMALL = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128, image_size=64,
             patch_size=16, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 64],
             fusion_hidden_size=32, num_labels=5)


def save_hf(cls, tmp_path, **overrides):
    config = transformers.DPTConfig(**{**SMALL, **overrides})
    model = perturb_(getattr(transformers, cls)(config)).eval()
    if cls == 'DPTForDepthEstimation':  # lift the last conv above the final ReLU so depth is not all zero
        with torch.no_grad():
            model.head.head[4].bias.fill_(0.5)
    model.save_pretrained(tmp_path)
    return model


def hf_output(model, x):
    out = model(pixel_values=x)
    return out.logits if hasattr(out, 'logits') else out.predicted_depth[:, None]


@pytest.mark.parametrize('cls,overrides', [
    ('DPTForSemanticSegmentation', dict(readout_type='project')),
    ('DPTForSemanticSegmentation', dict(readout_type='add', use_auxiliary_head=False)),
    ('DPTForSemanticSegmentation', dict(readout_type='ignore', use_batch_norm_in_fusion_residual=True)),
    ('DPTForDepthEstimation', dict(readout_type='project')),
    ('DPTForDepthEstimation', dict(readout_type='add', num_hidden_layers=6)),  # blocks after the last tap unused
])
def test_outputs_equal_transformers_at_the_configured_and_another_size(cls, overrides, tmp_path):
    hf = save_hf(cls, tmp_path, **overrides)
    ours = heads.from_pretrained_hf(tmp_path)
    assert isinstance(ours, heads.Segmentor if 'Semantic' in cls else heads.DepthEstimator)
    with torch.no_grad():
        for size in (64, 96):
            x = torch.randn(2, 3, size, size)
            expected = hf_output(hf, x)
            got = ours(x, mode='tensor')
            assert got.shape == expected.shape
            assert expected.std() > 0
            assert (got - expected).abs().max() <= 1e-4


def test_auxiliary_head_equals_transformers(tmp_path):
    hf = save_hf('DPTForSemanticSegmentation', tmp_path)
    ours = heads.from_pretrained_hf(tmp_path)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        hidden = hf.dpt(pixel_values=x, output_hidden_states=True).hidden_states
        taps = [h for i, h in enumerate(hidden[1:]) if i in hf.config.backbone_out_indices]
        expected = hf.auxiliary_head(hf.neck(taps)[-1])
        got = ours.auxiliary_head(ours.extract_features(x)[-1])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('readout', ['ignore', 'add', 'project'])
def test_non_square_inputs_run_with_every_readout(readout, tmp_path):
    save_hf('DPTForSemanticSegmentation', tmp_path, readout_type=readout)
    ours = heads.from_pretrained_hf(tmp_path)
    with torch.no_grad():
        assert ours(torch.randn(1, 3, 64, 160), mode='tensor').shape == (1, 5, 64, 160)


def test_external_backbone_configs_are_refused_clearly(tmp_path):  # DPT-Hybrid: tests/layouts/test_dpt_hybrid.py
    (tmp_path / 'config.json').write_text('{"model_type": "dpt", "backbone_config": {"model_type": "dinov2"}}')
    with pytest.raises(heads.hf.dpt.CheckpointError, match='external backbones are not'):
        heads.from_pretrained_hf(tmp_path)
    with pytest.raises(FileNotFoundError, match='config.json'):
        heads.from_pretrained_hf(tmp_path / 'nothing')


def test_convert_tool_writes_a_config_and_weights_that_predict_the_same(tmp_path):
    import convert_weights
    save_hf('DPTForDepthEstimation', tmp_path / 'hf')
    weights, config = convert_weights.convert_hf_dpt(tmp_path / 'hf', tmp_path / 'ours')
    direct = heads.from_pretrained_hf(tmp_path / 'hf')
    predictor = heads.Predictor(config, weights)
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        torch.testing.assert_close(predictor.model(x, mode='tensor'), direct(x, mode='tensor'))
