"""Our Mask2Former built from a transformers ``Mask2FormerForUniversalSegmentation`` save_pretrained folder (Swin
backbone) through ``heads.from_pretrained_hf`` gives transformers' class and mask logits, per layer too, and its loss.

Window 7 on stage maps of 16 down to 2 (64x64) and 16x32 down to 2x4 (64x128): no stage map is a multiple of the
window and the last are smaller than it, where transformers' Swin pads before its shift and keeps the window."""
import pytest
import torch

import heads
from heads.hf.config import HFConfigError
from heads.models.mask2former import Mask2Former

from ..reference import perturb_

transformers = pytest.importorskip('transformers')

TINY = dict(feature_size=32, mask_feature_size=32, hidden_dim=32, encoder_feedforward_dim=48, encoder_layers=2,
            decoder_layers=4, num_attention_heads=2, dim_feedforward=40, num_queries=6, num_labels=3)


def save_hf(tmp_path, image_size=64, **overrides):
    swin = transformers.SwinConfig(embed_dim=16, depths=[2, 1, 2, 1], num_heads=[1, 2, 2, 4], window_size=7,
                                   image_size=image_size, out_features=['stage1', 'stage2', 'stage3', 'stage4'])
    config = transformers.Mask2FormerConfig(backbone_config=swin, **{**TINY, **overrides})
    torch.manual_seed(0)
    model = perturb_(transformers.Mask2FormerForUniversalSegmentation(config), std=0.1).eval()
    model.save_pretrained(tmp_path)
    return model


def close(got, expected):
    assert got.shape == expected.shape
    scale = expected.abs().max()
    assert scale > 0 and (got - expected).abs().max() <= 1e-4 * scale


@pytest.mark.parametrize('overrides', [{}, dict(enforce_input_projection=True, hidden_dim=64, dim_feedforward=64)])
def test_logits_equal_transformers_at_the_configured_another_and_a_non_square_size(overrides, tmp_path):
    hf = save_hf(tmp_path, **overrides)
    ours = heads.from_pretrained_hf(tmp_path)
    assert isinstance(ours, Mask2Former)
    with torch.no_grad():
        for size in ((64, 64), (96, 96), (64, 128)):
            x = torch.randn(2, 3, *size)
            expected = hf(pixel_values=x, output_auxiliary_logits=True)
            class_logits, mask_logits, aux = ours.forward_logits(x)
            tensor_mode = ours(x, mode='tensor')
            assert len(tensor_mode) == 2 and torch.equal(tensor_mode[1], mask_logits)
            assert mask_logits.shape == (2, 6, size[0] // 4, size[1] // 4)
            close(class_logits, expected.class_queries_logits)
            close(mask_logits, expected.masks_queries_logits)
            assert len(aux) == len(expected.auxiliary_logits) == TINY['decoder_layers'] - 1
            for (cls, masks), ref in zip(aux, expected.auxiliary_logits):
                close(cls, ref['class_queries_logits'])
                close(masks, ref['masks_queries_logits'])


def test_loss_equals_transformers_on_a_fixed_batch(tmp_path):
    """The same images and targets, the same seed before each loss (the sampled points): transformers' total loss
    (final layer and every auxiliary one, weighted) equals the sum of ours."""
    from mmengine.structures import InstanceData
    from mmengine.structures.base_data_element import BaseDataElement
    hf = save_hf(tmp_path, train_num_points=64)
    ours = heads.from_pretrained_hf(tmp_path)
    torch.manual_seed(1)
    x = torch.randn(2, 3, 64, 64)
    labels = [torch.tensor([0, 2]), torch.tensor([1])]
    masks = [torch.rand(2, 64, 64) > 0.5, torch.rand(1, 64, 64) > 0.7]
    samples = [BaseDataElement(gt_instances=InstanceData(labels=lab, masks=m)) for lab, m in zip(labels, masks)]
    torch.manual_seed(2)
    expected = hf(pixel_values=x, mask_labels=[m.float() for m in masks], class_labels=labels).loss
    torch.manual_seed(2)
    losses = ours(x, samples, mode='loss')
    assert len(losses) == 3 * TINY['decoder_layers']
    got = sum(losses.values())
    assert expected > 0 and abs(got - expected) <= 1e-4 * expected


def test_unsupported_configs_are_refused_naming_the_field(tmp_path):
    from heads.hf.mask2former import mask2former_config_from_hf
    config = transformers.Mask2FormerConfig(**TINY).to_dict()
    for field, value in (('pre_norm', True), ('feature_size', 48), ('activation_function', 'gelu')):
        with pytest.raises(HFConfigError, match=field):
            mask2former_config_from_hf({**config, field: value}, 'config.json')
    swin = config['backbone_config']
    with pytest.raises(HFConfigError, match='use_absolute_embeddings'):
        mask2former_config_from_hf({**config, 'backbone_config': {**swin, 'use_absolute_embeddings': True}})
    with pytest.raises(HFConfigError, match='Swin backbone'):
        mask2former_config_from_hf({**config, 'backbone_config': {'model_type': 'resnet'}}, 'config.json')


def test_a_damaged_checkpoint_names_the_folder_and_its_key(tmp_path):
    from safetensors.torch import load_file, save_file

    from zoo.weights.layout_error import CheckpointLayoutError
    save_hf(tmp_path)
    state = load_file(tmp_path / 'model.safetensors')
    key = 'model.transformer_module.decoder.layers.0.cross_attn.in_proj_bias'
    state[key] = torch.zeros(31)
    save_file(state, tmp_path / 'model.safetensors', metadata={'format': 'pt'})
    with pytest.raises(CheckpointLayoutError, match=rf"{tmp_path}.*{key}.*3 \* width rows"):
        heads.from_pretrained_hf(tmp_path)


def test_malformed_model_type_and_feature_strides_are_named(tmp_path):
    """feature_strides an integer raised TypeError ('int' object is not iterable); a model_type that is a list
    TypeError (unhashable) in from_pretrained_hf."""
    import json

    from heads.hf.mask2former import mask2former_config_from_hf
    config = transformers.Mask2FormerConfig(**TINY).to_dict()
    with pytest.raises(HFConfigError, match=r"x/config.json: field 'feature_strides' must be \[4, 8, 16, 32\]"):
        mask2former_config_from_hf({**config, 'feature_strides': 4}, 'x/config.json')
    (tmp_path / 'config.json').write_text(json.dumps({**config, 'model_type': ['mask2former']}))
    with pytest.raises(HFConfigError, match=r"config.json: field 'model_type' must be a string"):
        heads.from_pretrained_hf(tmp_path)
