"""EVA-02 and EVA-02 CLIP (zoo.backbones.eva02): every registered name is one of timm's ``eva02_*`` and builds timm's
model (keys, shapes, parameter count, on the meta device); reduced towers of each code path (packed SwiGLU with q/v
biases; separate q/k/v and the MLP's norm; the norm before the attention's projection with CLS pooling; the
'res_post' blocks of the enormous tower) give timm's logits, pooled features and features from timm's perturbed
weights at the native size and a non-square one; the backbone's taps equal timm's intermediates at non-square
sizes; the core parts (the Mlp's ``norm``, ``PreNormLinear``) are their formulas; a damaged EVA-02 file names the
key. transformers 5.24 has no EVA-02 model (its PE video model wraps timm's towers), so timm's layout is the one
read."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.core import Mlp, PreNormLinear, QVBiasQKV
from zoo.weights import CheckpointLayoutError

from ..reference import (
    assert_classifier_equals_timm,
    assert_taps_equal_timm_intermediates,
    classifier_from_timm_file,
    meta_pair,
    meta_pair_with_timms_keys,
    timm_reference,
)

timm = pytest.importorskip('timm')
NAMES = zoo.list_backbones('eva02_*')
SMALLEST = 'eva02_tiny_patch14_224'
NARROW = dict(embed_dim=96, num_heads=4)  # the wide towers' code paths at a test's width


def test_the_registered_names_are_timms_eva02_names():
    assert NAMES == sorted(timm.list_models('eva02_*')) and len(NAMES) == 12


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if 'large' in n or 'enormous' in n else n
                                  for n in NAMES])  # ~1 s each on the meta device
def test_registered_options_build_timms_keys_shapes_and_parameter_count(name):
    ours, reference = meta_pair_with_timms_keys(name)
    block, timm_block = ours.blocks[0], reference.blocks[0]
    assert isinstance(block.attn.qkv, QVBiasQKV) and block.norm1.eps == timm_block.norm1.eps == 1e-6
    assert (block.attn.rope is None) == (reference.rope is None)
    assert isinstance(block.attn.proj, PreNormLinear) == isinstance(timm_block.attn.norm, nn.LayerNorm)
    assert isinstance(block.mlp.norm, nn.LayerNorm) == isinstance(getattr(timm_block.mlp, 'norm', None), nn.LayerNorm)
    assert block.mlp.gated == (type(timm_block.mlp).__name__ in ('GluMlp', 'SwiGLU'))
    assert block.norm_placement == ('res_post' if type(timm_block).__name__ == 'EvaBlockPostNorm' else 'pre')


def test_the_smallest_full_size_count_is_timms():
    ours, reference = meta_pair(SMALLEST)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters()) == 5_502_144


# name, width override, non-square size: one case per code path
PATHS = [(SMALLEST, {}, (126, 70)),                                 # fused qkv + q/v bias, packed SwiGLU, avg pool
         ('eva02_base_patch14_224', NARROW, (70, 112)),             # separate q/k/v, SwiGLU with its norm
         ('eva02_base_patch16_clip_224', NARROW, (96, 160)),        # + norm before proj, CLS pool, 14 -> 16 RoPE grid
         ('eva02_enormous_patch14_clip_224', NARROW, (70, 126))]    # no RoPE, GELU, res_post blocks


@pytest.mark.parametrize('name,small,size', PATHS)
def test_logits_and_pooled_features_equal_timm(name, small, size, tmp_path):
    ours, reference, native = classifier_from_timm_file(name, tmp_path, **small)
    assert ours.blocks[0].norm1.weight.ne(1).any()  # perturbed: the norms are exercised
    assert_classifier_equals_timm(ours, reference, (native, size))


@pytest.mark.parametrize('name,small', [(SMALLEST, {}), ('eva02_base_patch16_clip_224', NARROW)])
def test_backbone_taps_equal_timms_intermediates_at_non_square_sizes(name, small, tmp_path):
    assert_taps_equal_timm_intermediates(name, tmp_path, prefix=True, **small)


def test_the_mlp_norm_part_norms_the_gated_hidden_before_fc2():
    torch.manual_seed(0)
    mlp = Mlp(8, 6, act_layer=nn.SiLU, gated=True, norm=nn.LayerNorm(6, eps=1e-6)).eval()
    nn.init.normal_(mlp.norm.weight)
    x = torch.randn(2, 3, 8)
    gate, value = F.linear(x, mlp.fc1.weight, mlp.fc1.bias).chunk(2, dim=-1)
    hidden = F.silu(gate) * value
    normed = (hidden - hidden.mean(-1, keepdim=True)) / torch.sqrt(hidden.var(-1, unbiased=False, keepdim=True) + 1e-6)
    want = F.linear(normed * mlp.norm.weight + mlp.norm.bias, mlp.fc2.weight, mlp.fc2.bias)
    assert (mlp(x) - want).abs().max() <= 1e-5
    assert set(Mlp(8, 6).state_dict()) == {'fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'}  # no norm: keys kept


def test_pre_norm_linear_reads_normed_inputs():
    torch.manual_seed(0)
    proj = PreNormLinear(6, 4, nn.LayerNorm(6))
    nn.init.normal_(proj.norm.bias)
    x = torch.randn(3, 6)
    want = F.linear(F.layer_norm(x, (6,), proj.norm.weight, proj.norm.bias), proj.weight, proj.bias)
    assert (proj(x) - want).abs().max() <= 1e-6
    assert set(proj.state_dict()) == {'weight', 'bias', 'norm.weight', 'norm.bias'}


def test_an_eva02_file_missing_a_key_projection_names_the_key(tmp_path):
    reference = timm_reference('eva02_base_patch14_224', depth=1, num_classes=0, **NARROW)
    state = dict(reference.state_dict())
    del state['blocks.0.attn.k_proj.weight']
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / 'w.safetensors')
    with pytest.raises(CheckpointLayoutError, match=r"key 'blocks\.0\.attn\.k_proj\.weight': missing beside "
                                                    r"q_proj\.weight, v_proj\.weight"):
        zoo.create_classifier('eva02_base_patch14_224', depth=1, pretrained=tmp_path / 'w.safetensors', **NARROW)


def test_list_models_reports_eva02_names_with_timms_counts():
    import list_models
    names = ['eva02_tiny_*', 'eva02_small_patch14_336', 'eva02_large_patch14_448', 'eva02_base_patch16_clip_224']
    rows = {r['name']: r for r in list_models.main(names)}
    # timm's model cards: EVA02-Ti 5.5 M (MIM, headless), EVA02-S 22.1 M at 336 (in1k head), EVA02-L 305.1 M at 448
    assert rows[SMALLEST]['classifier_params_M'] == 5.5 and rows[SMALLEST]['input'] == '224x224'
    assert rows['eva02_small_patch14_336']['classifier_params_M'] == pytest.approx(22.1, abs=0.05)
    assert rows['eva02_large_patch14_448']['classifier_params_M'] == pytest.approx(305.1, abs=0.05)
    assert rows['eva02_base_patch16_clip_224']['out_strides'] == [16] * 4 and rows[SMALLEST]['out_strides'] == [14] * 4
