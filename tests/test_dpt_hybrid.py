"""DPT-Hybrid: our models built from transformers' hybrid DPT checkpoints (is_hybrid, a BiT backbone) give
transformers' outputs; non-square inputs, which transformers' hybrid refuses or crashes on, run through ours."""
import json

import pytest
import torch

import heads

from .reference import perturb_

transformers = pytest.importorskip('transformers')

BIT = dict(depths=[1, 2, 1], hidden_sizes=[32, 64, 128], embedding_size=16, num_groups=4, layer_type='bottleneck',
           global_padding='same', embedding_dynamic_padding=True, out_features=['stage1', 'stage2', 'stage3'])
SMALL = dict(is_hybrid=True, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
             image_size=64, patch_size=16, backbone_out_indices=[0, 1, 1, 3], neck_hidden_sizes=[32, 64, 64, 64],
             fusion_hidden_size=32, num_labels=5, backbone_featmap_shape=[1, 128, 4, 4])


def save_hybrid(cls, folder, **overrides):
    torch.manual_seed(0)
    config = transformers.DPTConfig(**{**SMALL, 'backbone_config': dict(BIT), **overrides})
    model = perturb_(getattr(transformers, cls)(config), std=0.1).eval()  # outputs of std ~1, not ~0.01
    if cls == 'DPTForDepthEstimation':  # lift the last conv above the final ReLU so depth is not all zero
        with torch.no_grad():
            model.head.head[4].bias.fill_(0.5)
    model.save_pretrained(folder)
    return model


def hf_output(model, x):
    out = model(pixel_values=x)
    return out.logits if hasattr(out, 'logits') else out.predicted_depth[:, None]


@pytest.mark.parametrize('cls', ['DPTForSemanticSegmentation', 'DPTForDepthEstimation'])
def test_outputs_equal_transformers_hybrid(cls, tmp_path):
    hf = save_hybrid(cls, tmp_path)
    ours = heads.from_pretrained_hf(tmp_path)
    assert ours.backbone.out_indices == (0, 1, 4, 6) and ours.backbone.out_strides == [4, 8, 16, 16]
    assert len(ours.backbone.blocks) == 4 and ours.neck.reassemble[0].proj.__class__ is torch.nn.Identity
    x = torch.randn(2, 3, 64, 64)  # transformers' hybrid takes its configured size only
    with torch.no_grad():
        expected, got = hf_output(hf, x), ours(x, mode='tensor')
    assert got.shape == expected.shape and expected.std() > 0.1
    assert (got - expected).abs().max() <= 1e-4


def test_non_square_inputs_run_where_transformers_hybrid_cannot(tmp_path):
    hf = save_hybrid('DPTForSemanticSegmentation', tmp_path / 'square')
    ours = heads.from_pretrained_hf(tmp_path / 'square')
    x = torch.randn(1, 3, 64, 112)
    with torch.no_grad(), pytest.raises(ValueError, match="doesn't match model"):
        hf(pixel_values=x)  # any size but the configured one is refused
        # and a hybrid configured non-square crashes: its position table is taken for a square grid
    wide = perturb_(transformers.DPTForSemanticSegmentation(transformers.DPTConfig(
        **{**SMALL, 'image_size': [64, 112], 'backbone_featmap_shape': [1, 128, 4, 7], 'backbone_config': BIT})))
    with torch.no_grad(), pytest.raises(RuntimeError):
        wide(pixel_values=x)
    with torch.no_grad():
        out = ours(x, mode='tensor')
    assert out.shape == (1, 5, 64, 112) and torch.isfinite(out).all() and out.std() > 0


def _edited(folder, **changes):
    config = json.loads((folder / 'config.json').read_text())
    for key, value in changes.items():
        if key.startswith('bit_'):
            config['backbone_config'][key[4:]] = value
        else:
            config[key] = value
    (folder / 'config.json').write_text(json.dumps(config))


@pytest.mark.parametrize('changes,message', [
    (dict(bit_layer_type='preactivation'), "layer_type.*'bottleneck'"),
    (dict(bit_global_padding=None, bit_depths=[1, 2]), 'depths'),  # None is the default 'same'; 2 stages are not
    (dict(bit_global_padding='valid'), "global_padding.*'same'"),
    (dict(bit_num_groups=3), 'num_groups.*divisor'),
    (dict(backbone_featmap_shape=[1, 64, 4, 4]), 'backbone_featmap_shape.*128'),
    (dict(neck_hidden_sizes=[16, 64, 64, 64]), "neck_hidden_sizes.*\\[32, 64\\]"),
    (dict(backbone_config='bit'), 'backbone_config.*object'),
    (dict(is_hybrid='yes'), 'is_hybrid.*true or false'),
])
def test_bad_hybrid_configs_are_refused_naming_the_field(changes, message, tmp_path):
    save_hybrid('DPTForDepthEstimation', tmp_path)
    _edited(tmp_path, **changes)
    with pytest.raises(heads.hf.dpt.HFConfigError, match=message):
        heads.from_pretrained_hf(tmp_path)


def test_plain_levels_and_missing_prefix_tokens_are_checked_clearly():
    from heads.necks.dpt import DPTNeck
    with pytest.raises(ValueError, match='plain level 0 .* in_channels 32 vs hidden_channels 16'):
        DPTNeck([32, 64, 64, 64], [4, 8, 16, 16], ['cls'], hidden_channels=[16, 64, 64, 64], plain_levels=[0])
    neck = DPTNeck([32, 64, 64, 64], [4, 8, 16, 16], ['cls'], hidden_channels=[32, 64, 64, 64], fusion_channels=8)
    maps = [torch.randn(1, c, 32 // s * 4, 32 // s * 4) for c, s in zip([32, 64, 64, 64], [4, 8, 16, 16])]
    prefix = [None, None, torch.randn(1, 1, 64), torch.randn(1, 1, 64)]
    with pytest.raises(ValueError, match="without prefix tokens .* plain_levels"):
        neck(maps, prefix)
