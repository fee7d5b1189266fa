"""The ViT encoder is assembled from a family's spec of parts (issue 53): its constructor takes the sizes, the drop
rates and one spec; a block is built one way, from its parts; timm's option names are translated into the spec in one
place (zoo.backbones.timm_options)."""
import inspect

import pytest
import torch

import zoo
from zoo.backbones.dinov3 import DINOV3_SPEC
from zoo.backbones.eva02 import eva02_spec
from zoo.backbones.timm_options import OPTIONS, spec_from_timm_options
from zoo.backbones.vit import ViTEncoder
from zoo.backbones.vit_spec import AttentionSpec, BlockSpec, EncoderSpec, MlpSpec, PrefixSpec
from zoo.core import Block, QVBiasQKV
from zoo.option_types import OptionTypeError

TINY = dict(depth=1, embed_dim=32, num_heads=2, img_size=32, out_indices=(0,))


def test_encoder_takes_sizes_drop_rates_and_one_spec():
    params = [p for p in inspect.signature(ViTEncoder.__init__).parameters.values() if p.name != 'self']
    assert len(params) <= 12, [p.name for p in params]
    assert not [p.name for p in params if p.annotation in (bool, 'bool')]  # no flag that picks a part
    assert 'spec' in [p.name for p in params]


def test_block_is_built_from_its_parts_only():
    params = list(inspect.signature(Block.__init__).parameters)
    assert params[1:4] == ['dim', 'attn', 'mlp']
    assert not {'qkv_bias', 'gated_mlp', 'act_layer', 'mlp_ratio', 'attn_drop', 'num_heads'} & set(params)


def test_a_family_is_a_spec_of_parts():
    spec = DINOV3_SPEC.replace(block=dict(mlp=dict(kind='swiglu')))
    assert spec.prefix == PrefixSpec(cls=True, registers=4) and spec.positions.kind == 'none'
    assert spec.block.attn.qkv == 'fused_no_bias' and spec.block.attn.rope['kind'] == 'dinov3'
    assert spec.block.mlp == MlpSpec(kind='swiglu') and DINOV3_SPEC.block.mlp == MlpSpec()  # replace copies
    model = zoo.create_backbone('vit_small_patch16_dinov3', **TINY)
    assert model.spec == DINOV3_SPEC and model.pos_embed is None and len(model.prefix) == 5
    assert model.blocks[0].attn.qkv.bias is None and model.blocks[0].ls1.gamma[0] == 1e-5
    assert eva02_spec('base', clip=True).block.attn.proj == 'norm_linear'


@pytest.mark.parametrize('options,check', [
    (dict(qkv_bias=False), lambda m: m.blocks[0].attn.qkv.bias is None),
    (dict(key_bias=False), lambda m: isinstance(m.blocks[0].attn.qkv, QVBiasQKV)),
    (dict(init_values=0.5), lambda m: float(m.blocks[0].ls2.gamma[0]) == 0.5),
    (dict(class_token=False, reg_tokens=4), lambda m: m.prefix_names == ['reg0', 'reg1', 'reg2', 'reg3']),
    (dict(swiglu=True), lambda m: m.blocks[0].mlp.gated),
    (dict(proj_bias=False), lambda m: m.blocks[0].attn.proj.bias is None and m.blocks[0].mlp.fc1.bias is None),
    (dict(post_norm=True), lambda m: m.blocks[0].norm_placement == 'post'),
])
def test_timm_option_names_still_set_the_parts(options, check):
    assert check(zoo.create_backbone('vit_tiny_patch16_224', **TINY, **options))


def test_timm_options_change_only_what_they_name():
    spec = EncoderSpec(block=BlockSpec(attn=AttentionSpec(qkv='qv_bias'), layer_scale=1e-5))
    assert spec_from_timm_options(spec) is spec
    changed = spec_from_timm_options(spec, reg_tokens=2, norm_eps=1e-5)
    assert changed == spec.replace(prefix=dict(registers=2), norm_eps=1e-5)
    assert spec_from_timm_options(spec, qkv_bias=False).block.attn.qkv == 'fused_no_bias'
    assert set(OPTIONS) >= {'qkv_bias', 'init_values', 'class_token', 'reg_tokens', 'pos_interp', 'swiglu'}


def test_unknown_or_mistyped_part_options_are_refused_before_building():
    with pytest.raises(TypeError, match=r"does not accept \['qkv_biass'\].*'qkv_bias'"):
        zoo.create_backbone('vit_tiny_patch16_224', qkv_biass=False)
    with pytest.raises(OptionTypeError, match=r"option class_token expects bool, got 'no'"):
        zoo.create_backbone('vit_tiny_patch16_224', class_token='no')


def test_a_part_of_an_unknown_kind_is_refused_naming_the_kinds():
    with pytest.raises(ValueError, match=r"MlpSpec.kind must be one of 'mlp', 'swiglu', got 'geglu'"):
        MlpSpec(kind='geglu')
    with pytest.raises(ValueError, match=r"PositionSpec.kind \(pos_embed\) must be one of .*got 'rope'"):
        zoo.create_backbone('vit_tiny_patch16_224', pos_embed='rope')


def test_a_spec_builds_the_encoder_directly():
    spec = EncoderSpec(prefix=PrefixSpec(cls=False), block=BlockSpec(mlp=MlpSpec(kind='swiglu')))
    model = ViTEncoder(img_size=32, patch_size=16, embed_dim=32, depth=2, num_heads=2, spec=spec)
    x, grid = model.embed(torch.randn(1, 3, 32, 32))
    assert grid == (2, 2) and x.shape == (1, 4, 32) and model.run_blocks(x, grid)[0].shape == x.shape
