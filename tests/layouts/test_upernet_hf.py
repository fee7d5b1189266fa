"""transformers' ``UperNetForSemanticSegmentation`` (Swin backbone) from a save_pretrained folder through
``heads.from_pretrained_hf``: our Segmentor's ``mode='tensor'`` logits equal its ``logits``; the heads alone equal
transformers' ``UperNetHead`` / ``UperNetFCNHead`` given the same features.

Sizes: the configured 128 x 128 (window 4: the last stage map equals the window), 192 x 192 (stage maps not window
multiples: padded before the shift, as transformers' backbone and mmseg do) and a non-square 100 x 150 (odd maps
merged with padding)."""
import json

import pytest
import torch

from heads import from_pretrained_hf
from heads.hf.config import HFConfigError
from heads.hf.upernet import upernet_config_from_hf
from heads.layouts.upernet import upernet_heads_from_hf
from heads.registry import MODELS

from ..reference import perturb_

transformers = pytest.importorskip('transformers')
upernet = pytest.importorskip('transformers.models.upernet.modeling_upernet')

SWIN = dict(embed_dim=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4], window_size=4, image_size=128,
            out_features=['stage1', 'stage2', 'stage3', 'stage4'])
SIZES = [(128, 128), (192, 192), (100, 150)]


def hf_config(**kwargs):
    return transformers.UperNetConfig(backbone_config=transformers.SwinConfig(**SWIN), num_labels=5, hidden_size=32,
                                      auxiliary_channels=16, **kwargs)


def randomised(model):
    """Weights and BatchNorm statistics off their initialisation (eval mode)."""
    torch.manual_seed(0)
    perturb_(model, 0.05)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.1)
            module.running_var.uniform_(0.5, 2.0)
    return model.eval()


def close(got, want, tolerance=1e-4):
    assert got.shape == want.shape
    assert (got - want).abs().max() <= tolerance * want.abs().max(), (got - want).abs().max() / want.abs().max()


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp('upernet')
    randomised(transformers.UperNetForSemanticSegmentation(hf_config(auxiliary_concat_input=True))) \
        .save_pretrained(folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize('size', SIZES)
def test_logits_equal_transformers_from_a_save_pretrained_folder(saved, size):
    ours = from_pretrained_hf(saved)
    ref = transformers.UperNetForSemanticSegmentation.from_pretrained(saved).eval()  # fresh: its Swin keeps state
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        want = ref(pixel_values=x).logits
        close(ours(x, mode='tensor'), want)


def test_heads_equal_transformers_heads_on_the_same_features():
    config = hf_config(auxiliary_concat_input=True, auxiliary_num_convs=2)
    widths = [32, 64, 128, 256]
    ref = randomised(torch.nn.ModuleDict(dict(decode_head=upernet.UperNetHead(config, widths),
                                              auxiliary_head=upernet.UperNetFCNHead(config, widths))))
    model_cfg = upernet_config_from_hf(json.loads(config.to_json_string()))
    ours = torch.nn.ModuleDict(dict(decode_head=MODELS.build(model_cfg['decode_head']),
                                    auxiliary_head=MODELS.build(model_cfg['auxiliary_head']))).eval()
    ours.load_state_dict(upernet_heads_from_hf(ref.state_dict()))
    torch.manual_seed(1)
    levels = [torch.randn(2, c, 40 // 2 ** i, 24 // 2 ** i) for i, c in enumerate(widths)]  # non-square, 4 levels
    with torch.no_grad():
        close(ours['decode_head'](levels), ref['decode_head'](levels))
        close(ours['auxiliary_head'](levels), ref['auxiliary_head'](levels))


def test_a_non_swin_backbone_is_refused_by_name():
    config = json.loads(hf_config().to_json_string())
    config['backbone_config'] = {'model_type': 'convnext'}
    with pytest.raises(HFConfigError, match=r"config\.json: only UperNet with a transformers Swin"):
        upernet_config_from_hf(config)
    config = json.loads(hf_config().to_json_string())
    config['backbone_config']['window_size'] = 'seven'
    with pytest.raises(HFConfigError, match=r"backbone_config: field 'window_size'"):
        upernet_config_from_hf(config)
