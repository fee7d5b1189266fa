"""EoMT from transformers' ``EomtForUniversalSegmentation`` (and EoMT-DINOv3) save_pretrained folders
(``heads.from_pretrained_hf``): the same class and mask logits, with the masked attention on, off and drawn per query.

transformers' EoMT runs only at its configured square size (its position table has a row per patch of that grid and
is not resampled; ``grid_size`` is fixed), so the references are: the configured size of two configs (GELU with
registers, SwiGLU without, another grid), of EoMT-DINOv3 likewise (rotary positions, q/v biases), and a non-square
grid by giving transformers' model a position table of that grid (its ``position_embeddings`` and ``grid_size``
replaced; EoMT-DINOv3 only needs ``grid_size``), which ours loads as it is.

Probabilities are set in the paper's order (earlier blocks anneal first): transformers reuses the previous block's
mask in a block whose probability is 0 when an earlier one's is not; ours runs that block unmasked. The training
loss (matching and point-sampled mask losses over every block's predictions) equals transformers' too.
"""
import json

import pytest
import torch
from mmengine.structures import BaseDataElement, InstanceData
from torch import nn

import heads
from heads.hf.config import HFConfigError
from heads.hf.eomt import eomt_config_from_hf
from heads.layouts.hf_eomt import convert_hf_eomt_state
from heads.registry import MODELS
from zoo.weights import load_pretrained

from ..reference import perturb_

transformers = pytest.importorskip('transformers')

TINY = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, image_size=32, patch_size=4, num_queries=6,
            num_blocks=2, num_labels=5, layerscale_value=0.5)


def reference_model(dinov3: bool = False, **overrides):
    """transformers' EoMT (``dinov3``: EoMT-DINOv3, MLP width 64) of :data:`TINY` sizes, weights perturbed."""
    if dinov3:
        config = transformers.EomtDinov3Config(**{**TINY, 'intermediate_size': 64, **overrides})
        model = transformers.EomtDinov3ForUniversalSegmentation
    else:
        config, model = transformers.EomtConfig(**{**TINY, **overrides}), transformers.EomtForUniversalSegmentation
    torch.manual_seed(0)
    return perturb_(model(config), 0.05).eval()


def assert_same_logits(ours, reference, x, probs=(1.0, 1.0)):
    """Class and mask logits equal transformers' within 1e-4 of their scale, with ``probs`` in both models (the same
    random draws: each model seeded alike)."""
    reference.attn_mask_probs.copy_(torch.tensor(probs))
    ours.set_mask_probabilities(probs)
    with torch.no_grad():
        torch.manual_seed(1)
        expected = reference(pixel_values=x)
        torch.manual_seed(1)
        classes, masks = ours(x, mode='tensor')
    for got, want in ((classes, expected.class_queries_logits), (masks, expected.masks_queries_logits)):
        assert got.shape == want.shape
        assert (got - want).abs().max() <= 1e-4 * want.abs().max(), probs
    return masks


@pytest.mark.parametrize('overrides', [
    {}, dict(image_size=48, use_swiglu_ffn=True, num_register_tokens=0, num_upscale_blocks=1, num_blocks=3),
    dict(dinov3=True),
    dict(dinov3=True, image_size=48, use_gated_mlp=True, hidden_act='silu', num_register_tokens=2, num_blocks=3)])
def test_transformers_folder_gives_the_same_logits(overrides, tmp_path):
    reference = reference_model(**overrides)
    reference.save_pretrained(tmp_path)
    ours = heads.from_pretrained_hf(tmp_path)
    assert type(ours).__name__ == 'EoMT' and not ours.training
    size = reference.config.image_size
    x = torch.randn(2, 3, size, size)
    masked = assert_same_logits(ours, reference, x, [1.0] * ours.num_blocks)
    unmasked = assert_same_logits(ours, reference, x, [0.0] * ours.num_blocks)
    assert (masked - unmasked).abs().max() > 1e-2 * unmasked.abs().max()  # the masks change the result
    assert_same_logits(ours, reference, x, [0.5] + [0.25] * (ours.num_blocks - 1))  # some queries drop their mask


def test_non_square_grid_equals_transformers_with_that_grid():
    reference = reference_model()
    grid = (8, 12)
    with torch.no_grad():  # transformers' model on a 32x48 input: a table of 8x12 rows and that grid
        reference.embeddings.position_embeddings = nn.Embedding(grid[0] * grid[1], TINY['hidden_size'])
        reference.embeddings.position_ids = torch.arange(grid[0] * grid[1])[None]
        reference.grid_size = grid
    cfg = eomt_config_from_hf(reference.config.to_dict())
    cfg['backbone']['img_size'] = (32, 48)
    ours = MODELS.build(cfg)
    load_pretrained(ours, convert_hf_eomt_state(reference.state_dict()), format='zoo')
    ours.eval()
    x = torch.randn(1, 3, 32, 48)
    assert assert_same_logits(ours, reference, x).shape == (1, 6, 32, 48)
    assert_same_logits(ours, reference, x, (0.0, 0.0))


def test_dinov3_non_square_grid_equals_transformers(tmp_path):
    """EoMT-DINOv3 has no position table (rotary positions from the grid): transformers' runs a 32x48 input once
    told the grid."""
    reference = reference_model(dinov3=True)
    reference.save_pretrained(tmp_path)
    ours = heads.from_pretrained_hf(tmp_path)
    reference.grid_size = (8, 12)
    x = torch.randn(1, 3, 32, 48)
    assert_same_logits(ours, reference, x)
    assert_same_logits(ours, reference, x, (0.0, 0.5))  # annealed in block order, as the paper (module doc)


def test_other_sizes_run_with_the_table_resampled(tmp_path):
    """At 40x24 (a 10x6 grid; the folder's table is 8x8) ours equals transformers' model given the table resampled
    by the formula: bicubic to 10x6, half-pixel centres (align_corners=False), no antialias, as transformers'
    DINOv2 (a shape check alone passed whatever the resampling did)."""
    reference = reference_model()
    reference.save_pretrained(tmp_path)
    ours = heads.from_pretrained_hf(tmp_path)
    table = reference.embeddings.position_embeddings.weight.detach()  # '(8 8) c'
    grid = (10, 6)
    resampled = torch.nn.functional.interpolate(table.reshape(1, 8, 8, -1).permute(0, 3, 1, 2), size=grid,
                                                mode='bicubic', align_corners=False, antialias=False)
    with torch.no_grad():
        reference.embeddings.position_embeddings = nn.Embedding.from_pretrained(
            resampled.permute(0, 2, 3, 1).reshape(grid[0] * grid[1], -1))
        reference.embeddings.position_ids = torch.arange(grid[0] * grid[1])[None]
        reference.grid_size = grid
    x = torch.randn(1, 3, 40, 24)
    masks = assert_same_logits(ours, reference, x)
    assert masks.shape == (1, 6, 40, 24)  # 2 upscaling blocks: stride 4 / 4 = 1
    assert_same_logits(ours, reference, x, (0.0, 0.0))


def test_bad_config_fields_are_named(tmp_path):
    config = transformers.EomtConfig(**TINY).to_dict()
    with pytest.raises(HFConfigError, match="'hidden_act'"):
        eomt_config_from_hf({**config, 'hidden_act': 'relu'}, 'x/config.json')
    with pytest.raises(HFConfigError, match="'hidden_act' must be 'silu' with use_gated_mlp"):
        eomt_config_from_hf({**transformers.EomtDinov3Config(**TINY, use_gated_mlp=True).to_dict()}, 'x/config.json')
    with pytest.raises(HFConfigError, match="'num_blocks'.*at most num_hidden_layers"):
        eomt_config_from_hf({**config, 'num_blocks': 9}, 'x/config.json')
    with pytest.raises(HFConfigError, match="'num_attention_heads'"):
        eomt_config_from_hf({**config, 'num_attention_heads': 3}, 'x/config.json')
    dinov3 = transformers.EomtDinov3Config(**TINY).to_dict()
    with pytest.raises(HFConfigError, match="'key_bias' must be false"):
        eomt_config_from_hf({**dinov3, 'key_bias': True}, 'x/config.json')
    with pytest.raises(HFConfigError, match="'pos_embed_jitter' must be null"):
        eomt_config_from_hf({**dinov3, 'pos_embed_jitter': 0.1}, 'x/config.json')
    with pytest.raises(HFConfigError, match="not an EoMT config"):
        eomt_config_from_hf({**config, 'model_type': 'dinov2'}, 'x/config.json')


def test_training_loss_equals_transformers(tmp_path):
    """In training (predictions before every masked block, masks on), the summed loss over the blocks' predictions
    equals transformers' on the same batch and targets, its random points drawn alike (the same seed)."""
    reference = reference_model(train_num_points=64)
    reference.save_pretrained(tmp_path)
    ours = heads.from_pretrained_hf(tmp_path).train()
    reference.train()
    x = torch.randn(2, 3, 32, 32)
    generator = torch.Generator().manual_seed(3)
    masks = [torch.rand(n, 32, 32, generator=generator) > 0.6 for n in (2, 3)]
    labels = [torch.tensor([1, 4]), torch.tensor([0, 2, 2])]
    samples = [BaseDataElement(gt_instances=InstanceData(labels=lab, masks=m)) for lab, m in zip(labels, masks)]
    torch.manual_seed(5)
    expected = reference(pixel_values=x, mask_labels=[m.float() for m in masks], class_labels=labels).loss
    torch.manual_seed(5)
    losses = ours(x, samples, mode='loss')
    assert len(losses) == 3 * (1 + ours.num_blocks)  # cls, mask, dice of each block's prediction and the final one
    got = sum(losses.values())
    assert abs(got.item() - expected.item()) <= 1e-4 * abs(expected.item())
    got.backward()
    assert ours.query.weight.grad.abs().sum() > 0



def test_malformed_model_type_and_head_count_are_named(tmp_path):
    """A model_type that is a list or an object raised TypeError (unhashable) in from_pretrained_hf; an EoMT-DINOv3
    head count leaving a head width not divisible by 4 a ValueError from the rotary positions without the file."""
    config = transformers.EomtConfig(**TINY).to_dict()
    for model_type in (['eomt'], {'eomt': 1}):
        (tmp_path / 'config.json').write_text(json.dumps({**config, 'model_type': model_type}))
        with pytest.raises(HFConfigError, match=r"config.json: field 'model_type' must be a string naming the model"):
            heads.from_pretrained_hf(tmp_path)
    dinov3 = transformers.EomtDinov3Config(**TINY).to_dict()
    with pytest.raises(HFConfigError, match=r"x/config.json: field 'num_attention_heads' .* divisible by 4"):
        eomt_config_from_hf({**dinov3, 'num_attention_heads': 16}, 'x/config.json')
