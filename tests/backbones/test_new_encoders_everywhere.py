"""The 2026 encoders (DINOv3, SigLIP, CLIP, EVA-02, PE, AIMv2, C-RADIO, InternViT, NaFlex on a batch tensor) work with
what the project offers every backbone: ``forward_taps`` at non-square sizes their patch tiles, a DPT segmentor,
LoRA on every attention projection (merged = unmerged, gradients to the adapters only), layer-wise lr decay in depth
order, one FSDP unit per block, and ``tools/compare.py``'s identity check. Each at a small width and four blocks
(every part of the family kept)."""
import math

import pytest
import torch
from mmengine.config import Config

import zoo
from heads.engine.distributed.fsdp import shard_units
from heads.registry import MODELS
from lab.benchmark import compare
from zoo.lora import apply_lora, lora_modules, merge_lora

from ..training.test_classification import lr_scales

NARROW = dict(embed_dim=192, num_heads=3)
ENCODERS = {  # name: (shrinking overrides, patch)
    'vit_small_patch16_dinov3': (NARROW, 16),
    'vit_base_patch16_siglip_224': (NARROW, 16),
    'vit_base_patch16_clip_quickgelu_224': (NARROW, 16),
    'eva02_tiny_patch14_224': ({}, 14),
    'vit_pe_core_tiny_patch16_384': ({}, 16),
    'aimv2_large_patch14_224': (NARROW, 14),
    'vit_base_patch16_radio_v3': (NARROW, 16),
    'vit_intern300m_patch14_448': (NARROW, 14),
    'naflexvit_base_patch16_siglip': (NARROW, 16),
}
DEPTH = 4


def backbone(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    small, _ = ENCODERS[name]
    return zoo.create_backbone(name, depth=DEPTH, out_indices=(1, 3), **small).eval()


def segmentor(name: str):
    small, patch = ENCODERS[name]
    return MODELS.build(dict(
        type='Segmentor', backbone=dict(type='ZooBackbone', name=name, depth=DEPTH, out_indices=[0, 1, 2, 3],
                      **small),
        neck=dict(type='DPTNeck', hidden_channels=(16, 16, 16, 16), fusion_channels=16,
                  out_strides=[patch / 4, patch / 2, patch, patch * 2]),
        decode_head=dict(type='DPTSegHead', num_classes=3, in_channels=16)))


@pytest.mark.slow
@pytest.mark.parametrize('name', ENCODERS)
def test_taps_at_a_non_square_size_and_a_dpt_segmentor(name):
    _, patch = ENCODERS[name]
    x = torch.randn(1, 3, 3 * patch, 5 * patch)
    with torch.no_grad():
        maps = backbone(name)(x)
        logits = segmentor(name).eval()(x)
    assert [tuple(m.shape[-2:]) for m in maps] == [(3, 5)] * 2
    assert logits.shape == (1, 3, 3 * patch, 5 * patch) and torch.isfinite(logits).all()


@pytest.mark.slow
@pytest.mark.parametrize('name', ENCODERS)
def test_lora_adapts_every_block_and_merges_exactly(name):
    model = apply_lora(backbone(name), targets=('*.attn.qkv', '*.attn.qkv.*', '*.attn.proj'), rank=4)
    adapted = {n.split('.attn')[0] for n in lora_modules(model)}
    assert adapted == {f'blocks.{i}' for i in range(DEPTH)}, adapted
    with torch.no_grad():
        for module in lora_modules(model).values():
            module.lora_b.normal_(std=0.05)
    _, patch = ENCODERS[name]
    x = torch.randn(2, 3, 2 * patch, 3 * patch)
    out = model(x)
    sum(m.sum() for m in out).backward()
    trained = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert trained and all('lora_' in n for n in trained), sorted(trained)[:4]
    with torch.no_grad():
        unmerged = model(x)
        merged = merge_lora(model)(x)
    for a, b in zip(unmerged, merged):
        assert (a - b).abs().max() <= 1e-4 * b.abs().max()


@pytest.mark.parametrize('name', ENCODERS)
def test_layer_decay_follows_depth(name):
    groups = lr_scales(segmentor(name), 'backbone')
    backbone_lrs = [lr for key, (lr, _) in groups.items() if key.startswith('backbone.')]
    assert backbone_lrs == sorted(backbone_lrs)  # registration order is depth order
    assert math.isclose(backbone_lrs[0], 0.5 ** (DEPTH + 1)) and math.isclose(backbone_lrs[-1], 0.5)
    blocks = {lr for key, (lr, _) in groups.items() if '.blocks.' in key}
    assert blocks == {0.5 ** (DEPTH - i) for i in range(DEPTH)}
    assert all(lr == 1.0 for key, (lr, _) in groups.items() if not key.startswith('backbone.'))


@pytest.mark.parametrize('name', ENCODERS)
def test_fsdp_shards_one_unit_per_block(name):
    model = segmentor(name)
    units = shard_units(model)
    blocks = [m for n, m in model.named_modules() if n.rsplit('.', 1)[0].endswith('blocks')]
    assert len(units) == DEPTH and {id(u) for u in units} == {id(b) for b in blocks}


def test_compare_accepts_configs_that_differ_in_the_new_encoder_only():
    def experiment(name: str) -> Config:
        return Config(dict(model=dict(backbone=dict(type='ZooBackbone', name=name)),
                           optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-4)), crop_size=(224, 224)))
    compare.check_only_backbones_differ({name: experiment(name) for name in ENCODERS})
