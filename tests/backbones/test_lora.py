"""LoRA (zoo.lora): merged and unmerged models agree, gradients reach the adapters only (every parameter checked),
adapters round-trip through their own file, and the config switch builds a LoRA fine-tune."""
import pytest
import torch
from torch import nn

import zoo
from zoo.lora import (
    adapter_state_dict,
    apply_lora,
    load_adapters,
    lora_modules,
    lora_summary,
    merge_lora,
    save_adapters,
    unmerge_lora,
)

from ..reference import tiny_dpt

EVERY_LINEAR = ('*.attn.qkv', '*.attn.qkv.*', '*.attn.proj', '*.mlp.fc1', '*.mlp.fc2')


def small(name: str) -> nn.Module:
    """Small members of three kinds of q/k/v projection: a plain ViT (fused), a ViT with learned q and v biases and
    no key bias (BEiT, EVA, Swin V2, RoPE ViTs: :class:`zoo.core.QVBiasQKV`) and CvT (conv projections, separate)."""
    if name in ('vit', 'qv_bias'):
        return zoo.create_backbone('vit_tiny_patch16_224', depth=2, out_indices=(0, 1), key_bias=name == 'vit')
    return zoo.create_backbone('cvt_13_224', depths=(1, 1, 1), out_indices=(0, 1, 2))


def _randomise_adapters(model):
    with torch.no_grad():
        for module in lora_modules(model).values():
            module.lora_b.normal_(std=0.05)  # B starts at zero: give the adapters something to add


@pytest.mark.parametrize('family', ['vit', 'qv_bias', 'cvt'])
def test_merged_outputs_equal_unmerged_and_the_base_model_at_start(family):
    torch.manual_seed(0)
    model = small(family).eval()
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        base = model(x)
    apply_lora(model, EVERY_LINEAR, rank=4, alpha=8)
    assert len(lora_modules(model)) >= 8
    with torch.no_grad():
        for ours, ref in zip(model(x), base):  # B = 0: the adapted model starts as the base model
            torch.testing.assert_close(ours, ref)
        _randomise_adapters(model)
        unmerged = model(x)
        merge_lora(model)
        merged = model(x)
        unmerge_lora(model)
        again = model(x)
    for u, m, a, b in zip(unmerged, merged, again, base):
        assert (u - m).abs().max().item() <= 1e-5
        assert (u - a).abs().max().item() <= 1e-5
        assert (u - b).abs().max().item() > 1e-3  # the adapters do change the outputs


@pytest.mark.parametrize('family', ['vit', 'qv_bias'])
def test_gradients_reach_the_adapters_and_nothing_else(family):
    """In training mode (dropout on, the MLP's recomputed-activation path taken), every parameter checked."""
    torch.manual_seed(0)
    model = small(family).train()
    apply_lora(model, EVERY_LINEAR, rank=2, dropout=0.1)
    _randomise_adapters(model)
    maps = model(torch.randn(2, 3, 48, 64))
    sum(m.square().mean() for m in maps).backward()
    params = dict(model.named_parameters())
    adapters = {n for n in params if n.endswith(('.lora_a', '.lora_b'))}
    assert len(adapters) == 2 * 4 * 2  # A and B of 4 Linears (fused q/k/v, proj, fc1, fc2) in each of 2 blocks
    for name, p in params.items():
        if name in adapters:
            assert p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0, name
        else:
            assert not p.requires_grad and p.grad is None, name
    kept = apply_lora(small('vit'), '*.attn.qkv', trainable=('prefix.*',))
    assert {n for n, p in kept.named_parameters() if p.requires_grad} == \
        {'prefix.cls'} | {f'blocks.{i}.attn.qkv.lora_{ab}' for i in (0, 1) for ab in 'ab'}


def test_adapters_round_trip_through_their_own_small_file(tmp_path):
    torch.manual_seed(0)
    base_state = small('vit').state_dict()
    trained = small('vit').eval()
    trained.load_state_dict(base_state)
    apply_lora(trained, EVERY_LINEAR, rank=4)
    _randomise_adapters(trained)
    size = save_adapters(trained, tmp_path / 'adapters.safetensors')
    assert size == (tmp_path / 'adapters.safetensors').stat().st_size
    assert size < 0.2 * sum(v.numel() * v.element_size() for v in base_state.values())
    fresh = small('vit').eval()
    fresh.load_state_dict(base_state)
    apply_lora(fresh, EVERY_LINEAR, rank=4)
    merge_lora(fresh)  # loading into a merged model re-merges with the loaded adapters
    load_adapters(fresh, tmp_path / 'adapters.safetensors')
    x = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        torch.testing.assert_close(fresh(x)[-1], trained(x)[-1], atol=1e-5, rtol=1e-5)
    assert set(adapter_state_dict(fresh)) == set(adapter_state_dict(trained))
    other_rank = apply_lora(small('vit'), EVERY_LINEAR, rank=2)
    with pytest.raises(ValueError, match='shape mismatch'):
        load_adapters(other_rank, tmp_path / 'adapters.safetensors')
    summary = lora_summary(trained)
    assert 'LoRA rank 4 on 8 Linears' in summary and 'KiB' in summary


def test_bad_lora_options_are_refused_clearly():
    with pytest.raises(ValueError, match='match no nn.Linear.*blocks.0.attn.qkv'):
        apply_lora(small('vit'), '*.query')
    with pytest.raises(ValueError, match='positive int'):
        apply_lora(small('vit'), rank=0)
    with pytest.raises(TypeError, match='lora must be a dict'):
        zoo.create_backbone('vit_tiny_patch16_224', depth=1, out_indices=(0,), lora=4)
    with pytest.raises(ValueError, match='no LoRA adapters'):
        save_adapters(small('vit'), '/dev/null')


def test_config_switch_fine_tunes_any_config_with_lora():
    from heads.engine.config.check import check_config_keys
    from heads.registry import MODELS
    cfg = tiny_dpt()
    cfg['backbone'] = {**cfg['backbone'], 'lora': dict(rank=4, alpha=8, targets=['*.attn.qkv', '*.mlp.fc2'])}
    check_config_keys({'model': cfg})
    model = MODELS.build(cfg)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    backbone_trained = {n for n in trainable if n.startswith('backbone.')}
    assert backbone_trained == {f'backbone.blocks.{i}.{layer}.lora_{ab}' for i in range(4)
                                for layer in ('attn.qkv', 'mlp.fc2') for ab in 'ab'}
    assert any(n.startswith('neck.') for n in trainable)  # the task parts stay trainable
    with pytest.raises(TypeError, match='does not accept'):
        MODELS.build({**cfg, 'backbone': {**cfg['backbone'], 'lora_rank': 4}})


def test_a_base_checkpoint_loads_into_a_lora_model_with_the_adapters_at_their_start(tmp_path):
    import pickle
    base = small('vit').eval()
    adapted = apply_lora(small('vit').eval(), EVERY_LINEAR, rank=2)
    report = zoo.load_pretrained(adapted, base.state_dict(), format='zoo')
    assert report.missing == []
    x = torch.randn(1, 3, 32, 48)
    with torch.no_grad():
        torch.testing.assert_close(adapted(x)[-1], base(x)[-1])
    restored = pickle.loads(pickle.dumps(adapted))  # the LoRA form of a Linear subclass pickles by name
    assert type(restored.blocks[0].attn.qkv).__name__ == 'LoRAFusedQKV'
