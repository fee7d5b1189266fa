"""fp32 CPU products through oneDNN (zoo.runtime.gemm) equal torch's, forward and backward, in every layer
that uses them; the kernel choice follows this machine's CPU or ZOO_CPU_GEMM, once the kernel policy enabled it."""
import copy
import pickle

import pytest
import torch
from torch import nn

from zoo import create_backbone
from zoo.core import FusedQKV, Mlp
from zoo.lora import apply_lora
from zoo.runtime import apply_kernel_policy
from zoo.runtime import gemm as cpu_gemm

needs_onednn = pytest.mark.skipif(not cpu_gemm.has_onednn(), reason="this torch has no oneDNN linear")


@pytest.fixture
def onednn(monkeypatch):
    """oneDNN taken whatever this CPU's rule chose, the policy enabled."""
    monkeypatch.setenv('ZOO_CPU_GEMM', 'onednn')
    monkeypatch.setattr(cpu_gemm, '_enabled', True)


def _counting(monkeypatch):
    calls = []
    real = cpu_gemm._pointwise
    monkeypatch.setattr(cpu_gemm, '_pointwise', lambda *a: calls.append(a[0].shape) or real(*a))
    return calls


@needs_onednn
@pytest.mark.parametrize('shape', [(7, 12), (2, 5, 12), (2, 3, 4, 12), (0, 12)])
@pytest.mark.parametrize('bias', [True, False])
def test_linear_and_its_gradients_equal_torch(onednn, monkeypatch, shape, bias):
    torch.manual_seed(0)
    calls = _counting(monkeypatch)
    x = torch.randn(shape).requires_grad_()
    weight, b = torch.randn(9, 12).requires_grad_(), torch.randn(9).requires_grad_() if bias else None
    x_ref, w_ref = x.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    b_ref = b.detach().clone().requires_grad_() if bias else None
    out, ref = cpu_gemm.linear(x, weight, b), nn.functional.linear(x_ref, w_ref, b_ref)
    grad = torch.randn_like(ref)
    out.backward(grad)
    ref.backward(grad)
    assert out.shape == ref.shape and bool(calls) == (x.numel() > 0)  # oneDNN ran (not for an empty input)
    for ours, theirs in [(out, ref), (x.grad, x_ref.grad), (weight.grad, w_ref.grad)] + (
            [(b.grad, b_ref.grad)] if bias else []):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_mm_equals_matmul_for_transposed_operands(onednn):
    a, b = torch.randn(6, 10), torch.randn(4, 10)
    torch.testing.assert_close(cpu_gemm.mm(a, b.t()), a @ b.t(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cpu_gemm.mm(a.t(), a), a.t() @ a, rtol=1e-5, atol=1e-5)


def test_other_dtypes_devices_and_modes_take_torch(onednn, monkeypatch):
    calls = _counting(monkeypatch)
    x, weight = torch.randn(3, 8), torch.randn(5, 8)
    cpu_gemm.linear(x.double(), weight.double())
    cpu_gemm.linear(x.bfloat16(), weight.bfloat16())
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert cpu_gemm.linear(x, weight).dtype == torch.bfloat16  # autocast's own (oneDNN bf16) product
    monkeypatch.setenv('ZOO_CPU_GEMM', 'torch')
    cpu_gemm.linear(x, weight)
    assert calls == []
    monkeypatch.setenv('ZOO_CPU_GEMM', 'onednn')
    cpu_gemm.enable(False)  # no kernel policy applied: torch's, whatever the choice
    cpu_gemm.linear(x, weight)
    cpu_gemm.mm(x, weight.t())
    assert calls == []


def test_choice_follows_the_cpu_vendor_and_the_environment(monkeypatch):
    monkeypatch.setenv('ZOO_CPU_GEMM', 'auto')
    speedup = cpu_gemm.onednn_speedup()
    assert cpu_gemm.onednn_speedup() == speedup  # measured once per process, for reports
    assert cpu_gemm.uses_onednn() == (cpu_gemm.cpu_vendor() == 'AuthenticAMD' and cpu_gemm._avx512()
                                       and cpu_gemm.has_onednn())
    assert (speedup > 0) == cpu_gemm.has_onednn()
    for vendor, avx512, expected in [('AuthenticAMD', True, cpu_gemm.has_onednn()), ('AuthenticAMD', False, False),
                                     ('GenuineIntel', True, False), ('', True, False)]:
        monkeypatch.setattr(cpu_gemm, 'cpu_vendor', lambda vendor=vendor: vendor)
        monkeypatch.setattr(cpu_gemm, '_avx512', lambda avx512=avx512: avx512)
        assert cpu_gemm.uses_onednn() == expected
    monkeypatch.setenv('ZOO_CPU_GEMM', 'onednn')
    assert cpu_gemm.uses_onednn()
    monkeypatch.setenv('ZOO_CPU_GEMM', 'mkl')
    with pytest.raises(ValueError, match="ZOO_CPU_GEMM must be one of .*'mkl'"):
        cpu_gemm.uses_onednn()


@needs_onednn
def test_models_train_alike_with_either_kernel(monkeypatch):
    """A ViT backbone (fused q/k/v, the MLP's GELU-linear with its own backward) and LoRA on top: every Linear is
    routed by the kernel policy, keeps its class, behaviour and state dict, and gives torch's outputs and gradients."""
    torch.manual_seed(0)
    model = create_backbone('vit_tiny_patch16_224', depth=2, img_size=32, out_indices=(1,))
    apply_kernel_policy(model)
    assert type(model.blocks[0].attn.qkv) is FusedQKV
    assert isinstance(model.blocks[0].mlp, Mlp) and type(model.blocks[0].mlp.fc2) is nn.Linear
    apply_lora(model, rank=2)
    nn.init.normal_(model.blocks[0].attn.qkv.lora_b)
    calls = _counting(monkeypatch)
    x = torch.randn(2, 3, 32, 32)
    results = []
    for choice in ('torch', 'onednn'):
        monkeypatch.setenv('ZOO_CPU_GEMM', choice)
        model.zero_grad()
        out = model(x)[0]
        out.square().mean().backward()
        results.append((out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
        # torch: none; oneDNN: at least the forwards of q/k/v (with its adapter), projection, the MLP's two per block
        assert (len(calls) >= 2 * 4) if choice == 'onednn' else not calls, calls
    (out_t, grads_t), (out_o, grads_o) = results
    assert grads_t.keys() == grads_o.keys() and {n.rsplit('.', 1)[-1] for n in grads_o} == {'lora_a', 'lora_b'}
    torch.testing.assert_close(out_o, out_t, rtol=1e-4, atol=1e-5)
    for name in grads_t:
        torch.testing.assert_close(grads_o[name], grads_t[name], rtol=1e-4, atol=1e-5, msg=name)


def test_routing_keeps_class_and_state_dict_and_travels_with_copies(onednn, monkeypatch):
    model = nn.Sequential(nn.Linear(4, 3), FusedQKV(3))
    keys = model.state_dict().keys()
    apply_kernel_policy(model)
    apply_kernel_policy(model)  # twice: nothing more
    assert [type(m) for m in model] == [nn.Linear, FusedQKV] and model.state_dict().keys() == keys
    calls = _counting(monkeypatch)
    x = torch.randn(2, 4)
    for copied in (model, copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        torch.testing.assert_close(copied(x)[0], model(x)[0])
        assert vars(copied[0])['forward'].module is copied[0]  # each copy computes with its own weights
    assert len(calls) == 2 * 3 * 2  # both layers through oneDNN in the model and in both copies
