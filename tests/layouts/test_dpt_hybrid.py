"""DPT-Hybrid: our models built from transformers' hybrid DPT checkpoints (is_hybrid, a BiT backbone) give
transformers' outputs; non-square inputs, which transformers' hybrid refuses or crashes on, run through ours."""
import json

import pytest
import torch

import heads
from zoo.weights.rename import rules

from ..reference import perturb_

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


# transformers' DPT keys -> the official isl-org/DPT layout (the inverse of transformers' conversion script)
_TO_OFFICIAL = [
    *rules(r"""
        ^dpt\.embeddings\.cls_token$                            -> pretrained.model.cls_token
        ^dpt\.embeddings\.position_embeddings$                  -> pretrained.model.pos_embed
        ^dpt\.embeddings\.projection\.                          -> pretrained.model.patch_embed.proj.
        ^dpt\.embeddings\.backbone\.bit\.                       -> pretrained.model.patch_embed.backbone.
        \.backbone\.embedder\.convolution\.                     -> .backbone.stem.conv.
        \.backbone\.embedder\.norm\.                            -> .backbone.stem.norm.
        \.backbone\.encoder\.stages\.(\d)\.layers\.(\d)\.       -> .backbone.stages.\1.blocks.\2.
        ^dpt\.encoder\.layer\.(\d)\.attention\.output\.dense\.  -> pretrained.model.blocks.\1.attn.proj.
        ^dpt\.encoder\.layer\.(\d)\.layernorm_before\.          -> pretrained.model.blocks.\1.norm1.
        ^dpt\.encoder\.layer\.(\d)\.layernorm_after\.           -> pretrained.model.blocks.\1.norm2.
        ^dpt\.encoder\.layer\.(\d)\.intermediate\.dense\.       -> pretrained.model.blocks.\1.mlp.fc1.
        ^dpt\.encoder\.layer\.(\d)\.output\.dense\.             -> pretrained.model.blocks.\1.mlp.fc2.
        ^dpt\.layernorm\.                                       -> pretrained.model.norm.
    """),
    (r'^neck\.reassemble_stage\.readout_projects\.(\d)\.0\.', lambda m: f'pretrained.act_postprocess{int(m[1]) + 1}'
                                                                       f'.0.project.0.'),
    (r'^neck\.reassemble_stage\.layers\.(\d)\.projection\.', lambda m: f'pretrained.act_postprocess{int(m[1]) + 1}.3.'),
    (r'^neck\.reassemble_stage\.layers\.(\d)\.resize\.', lambda m: f'pretrained.act_postprocess{int(m[1]) + 1}.4.'),
    (r'^neck\.convs\.(\d)\.', lambda m: f'scratch.layer{int(m[1]) + 1}_rn.'),
    (r'^neck\.fusion_stage\.layers\.(\d)\.', lambda m: f'scratch.refinenet{4 - int(m[1])}.'),
    *rules(r"""
        \.residual_layer(\d)\.convolution(\d)\.  -> .resConfUnit\1.conv\2.
        \.residual_layer(\d)\.batch_norm(\d)\.   -> .resConfUnit\1.bn\2.
        ^(scratch\.refinenet\d)\.projection\.    -> \1.out_conv.
        ^head\.head\.                            -> scratch.output_conv.
        ^auxiliary_head\.head\.                  -> auxlayer.
    """),
]


def official_layout(hf_state: dict) -> dict:
    import re
    state, qkv = {}, {}
    for key, value in hf_state.items():
        fused = re.match(r'^dpt\.encoder\.layer\.(\d)\.attention\.attention\.(query|key|value)\.(weight|bias)$', key)
        if fused:
            qkv.setdefault((fused[1], fused[3]), {})[fused[2]] = value
            continue
        for pattern, replacement in _TO_OFFICIAL:
            key = re.sub(pattern, replacement, key, count=1)
        state[key] = value
    for (block, kind), parts in qkv.items():
        state[f'pretrained.model.blocks.{block}.attn.qkv.{kind}'] = torch.cat([parts[n] for n in ('query', 'key',
                                                                                                    'value')])
    state['pretrained.model.head.weight'] = torch.zeros(1000, SMALL['hidden_size'])  # the ViT's classifier: unused
    assert all(k.startswith(('pretrained.', 'scratch.', 'auxlayer.')) for k in state), sorted(state)
    return state


@pytest.mark.parametrize('cls,overrides', [('DPTForSemanticSegmentation', dict(use_batch_norm_in_fusion_residual=True)),
                                           ('DPTForDepthEstimation', {})])
def test_official_dpt_hybrid_layout_loads_to_the_same_outputs(cls, overrides, tmp_path):
    from heads.models.dpt_official import load_official_dpt
    from heads.registry import MODELS
    hf = save_hybrid(cls, tmp_path, **overrides)
    torch.save(official_layout(hf.state_dict()), tmp_path / 'dpt_hybrid.pt')
    model = MODELS.build(heads.from_pretrained_hf(tmp_path).hf_model_config)  # the same architecture, fresh weights
    report = load_official_dpt(model, tmp_path / 'dpt_hybrid.pt')
    assert 'backbone.norm.weight' not in report.unexpected and not report.missing
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        expected, got = hf_output(hf, x), model.eval()(x, mode='tensor')
    assert expected.std() > 0.1 and (got - expected).abs().max() <= 1e-4


def test_dpt_hybrid_config_builds_the_released_architecture():
    from heads.models.dpt_official import dpt_hybrid_config
    from heads.registry import MODELS
    with torch.device('meta'):
        model = MODELS.build(dpt_hybrid_config('midas'))
    # isl-org/DPT's DPT-Hybrid: hooks [0, 1, 8, 11], scratch widths [256, 512, 768, 768], features 256
    assert model.backbone.out_channels == [256, 512, 768, 768] and model.backbone.out_strides == [4, 8, 16, 16]
    assert len(model.backbone.blocks) == 12 and model.neck.level_strides == [4, 8, 16, 32]
    with pytest.raises(ValueError, match="'ade20k' or 'midas'"):
        dpt_hybrid_config('nyu')
