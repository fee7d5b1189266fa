"""CLIP image towers (zoo.backbones.clip): every registered name builds timm's model (keys, shapes, activation, norm
eps); reduced-depth towers give timm's logits and pooled features at the native size and a non-square one; the
full-size smallest tower has timm's parameter count; transformers' CLIPVisionModel, CLIPVisionModelWithProjection and
CLIPModel folders load and give their outputs; the backbone taps non-square inputs and drives a DPT."""
import pytest
import torch
from mmengine.structures import BaseDataElement, PixelData
from torch import nn

import zoo
from zoo.core import QuickGELU
from zoo.weights import CheckpointLayoutError
from zoo.weights.timm import vit_from_timm

from ..reference import assert_classifier_equals_timm, meta_pair, perturb_, save_safetensors, timm_reference, tiny_dpt

timm = pytest.importorskip('timm')
SMALLEST = 'vit_xsmall_patch16_clip_224'
NAMES = zoo.list_backbones('vit_*_clip_*')


def test_the_registered_names_are_timms_clip_vits():
    assert NAMES == sorted(n for n in timm.list_models('vit_*_clip_*'))
    assert len(NAMES) == 26


@pytest.mark.parametrize('name', NAMES)
def test_registered_options_build_timms_keys_shapes_activation_and_eps(name):
    ours, reference = meta_pair(name)
    want = {k: tuple(v.shape) for k, v in vit_from_timm(reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    quick = '_quickgelu_' in name
    assert isinstance(ours.blocks[0].mlp.act, QuickGELU if quick else nn.GELU)
    assert type(reference.blocks[0].mlp.act).__name__ == ('QuickGELU' if quick else 'GELU')
    assert ours.norm_pre.eps == ours.blocks[0].norm1.eps == ours.norm.eps == 1e-5


def test_full_size_parameter_count_equals_timms():
    ours, reference = meta_pair(SMALLEST)
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in reference.parameters()) == 8_277_504


@pytest.mark.parametrize('name,size', [(SMALLEST, (160, 96)), ('vit_base_patch32_clip_quickgelu_224', (192, 288))])
def test_logits_and_pooled_features_equal_timm(name, size, tmp_path):
    reference = timm_reference(name, depth=2, num_classes=512, dynamic_img_size=True)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, depth=2, num_classes=512, pretrained=path).eval()
    assert ours.norm_pre.weight.ne(1).any()  # perturbed: the pre-norm is exercised
    assert_classifier_equals_timm(ours, reference, ((224, 224), size))


HF_SMALL = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, image_size=56,
                patch_size=14, projection_dim=32)
OURS_SMALL = dict(embed_dim=64, depth=2, num_heads=4, img_size=56)
NAME_14 = 'vit_large_patch14_clip_quickgelu_224'  # transformers' default activation: QuickGELU


def _hf_model(cls: str, tmp_path):
    transformers = pytest.importorskip('transformers')
    if cls == 'CLIPModel':
        config = transformers.CLIPConfig(vision_config=HF_SMALL, projection_dim=32, text_config=dict(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=99))
    else:
        config = transformers.CLIPVisionConfig(**HF_SMALL)
    reference = perturb_(getattr(transformers, cls)(config)).eval()
    reference.save_pretrained(tmp_path)
    return reference


def test_transformers_clip_vision_model_loads_to_its_hidden_states_and_pooled_output(tmp_path):
    reference = _hf_model('CLIPVisionModel', tmp_path)
    backbone = zoo.create_backbone(NAME_14, out_indices=(1,), pretrained=tmp_path, **OURS_SMALL).eval()
    pooled = zoo.create_classifier(NAME_14, num_classes=0, pretrained=tmp_path, **OURS_SMALL).eval()
    x = torch.randn(2, 3, 56, 56)
    with torch.no_grad():
        out = reference(pixel_values=x)
        (got,), (prefix,) = backbone.forward_taps(x)
        features = pooled(x)
    hidden = out.last_hidden_state  # 'b (1 + h w) d' before post_layernorm
    assert (prefix - hidden[:, :1]).abs().max() <= 1e-4
    assert (got - hidden[:, 1:].transpose(1, 2).reshape(got.shape)).abs().max() <= 1e-4
    assert (features - out.pooler_output).abs().max() <= 1e-4


@pytest.mark.parametrize('cls', ['CLIPVisionModelWithProjection', 'CLIPModel'])
def test_transformers_projection_is_the_classifier_head(cls, tmp_path):
    reference = _hf_model(cls, tmp_path)
    report = zoo.load_pretrained(ours := zoo.create_classifier(NAME_14, num_classes=32, **OURS_SMALL), tmp_path)
    assert report.format == 'hf' and not (report.missing or report.unexpected)
    x = torch.randn(2, 3, 56, 56)
    with torch.no_grad():
        want = reference.get_image_features(pixel_values=x) if cls == 'CLIPModel' else \
            reference(pixel_values=x).image_embeds
        got = ours.eval()(x)
    want = getattr(want, 'pooler_output', want)
    assert (got - want).abs().max() <= 1e-4
    assert not ours.head.bias.any()


def test_transformers_folder_missing_a_key_projection_names_the_key(tmp_path):
    from safetensors.torch import load_file, save_file
    _hf_model('CLIPVisionModel', tmp_path)
    state = load_file(tmp_path / 'model.safetensors')
    key = next(k for k in state if k.endswith('encoder.layers.1.self_attn.k_proj.weight'))  # 'vision_model.' or not
    del state[key]
    save_file(state, tmp_path / 'model.safetensors')
    with pytest.raises(CheckpointLayoutError, match=f"key '{key}': missing beside q_proj.weight, v_proj.weight"):
        zoo.create_backbone(NAME_14, pretrained=tmp_path, **OURS_SMALL)


def test_backbone_taps_a_non_square_input_and_drives_a_dpt():
    import heads
    backbone = zoo.create_backbone(SMALLEST, depth=4, out_indices=(0, 1, 2, 3))
    maps, prefix = backbone.forward_taps(torch.randn(1, 3, 96, 160))
    assert [tuple(m.shape) for m in maps] == [(1, 256, 6, 10)] * 4 and [tuple(p.shape) for p in prefix] == [
        (1, 1, 256)] * 4
    model = heads.MODELS.build(tiny_dpt('seg', backbone=dict(type='ZooBackbone', name=SMALLEST, depth=4,
                                                             out_indices=(0, 1, 2, 3))))
    x = torch.randn(2, 3, 64, 96)
    samples = [BaseDataElement(gt_sem_seg=PixelData(data=label[None])) for label in torch.randint(0, 11, (2, 64, 96))]
    sum(model(x, samples, mode='loss').values()).backward()
    assert model.backbone.norm_pre.weight.grad.abs().sum() > 0
    assert model(x, mode='tensor').shape == (2, 11, 64, 96)


def test_a_timm_vit_file_read_as_transformers_is_refused_with_the_fix():
    from zoo.weights import CheckpointError
    model = zoo.create_classifier(SMALLEST, depth=1)
    with pytest.raises(CheckpointError, match="not transformers' CLIP vision layout.*format='auto'"):
        zoo.load_pretrained(model, model.state_dict(), format='hf')
    assert zoo.load_pretrained(model, model.state_dict()).format in ('zoo', 'timm')
