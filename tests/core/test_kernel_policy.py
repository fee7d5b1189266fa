"""The CPU kernel policy (zoo.runtime) is one explicit step: building a model never depends on it or on the machine,
applying it changes no module's class, and a run's log says what it chose."""
import sys

import pytest
from torch import nn

import heads
from zoo.lora import apply_lora
from zoo.runtime import apply_kernel_policy

from ..reliability.test_reliability_checkpoints import _in_project_root, quick, train_tool  # noqa: F401

POLICIES = [  # environment overrides x the fp32-convolution switch (None: this CPU decides)
    ({}, None), ({'ZOO_CPU_GEMM': 'onednn', 'ZOO_CONV_WEIGHT_GRAD': 'gemm'}, True),
    ({'ZOO_CPU_GEMM': 'torch', 'ZOO_CONV_WEIGHT_GRAD': 'onednn'}, False)]


def task_model() -> nn.Module:
    """A tiny segmentor with every kind of layer the policy routes: Linears (plain, fused q/k/v, LoRA's),
    convolutions in the backbone and in the neck and heads, transposed convolutions."""
    backbone = dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, img_size=64, out_indices=(0, 1, 2, 3))
    model = heads.MODELS.build(dict(
        type='Segmentor', backbone=backbone, neck=dict(type='DPTNeck', hidden_channels=(16, 16, 16, 16),
                                                       fusion_channels=16),
        decode_head=dict(type='DPTSegHead', in_channels=16, num_classes=3),
        auxiliary_head=dict(type='DPTSegHead', in_channels=16, num_classes=3, upsample=False)))
    return apply_lora(model, targets=('backbone.blocks.0.attn.qkv', 'backbone.blocks.1.mlp.fc1'), rank=2)


def classes(model: nn.Module) -> dict[str, type]:
    return {name: type(m) for name, m in model.named_modules()}


def test_a_model_has_the_same_classes_under_every_kernel_policy(monkeypatch):
    """Built under any override, before and after the policy: the same classes, each one its module defines (no
    class made on the fly for this machine)."""
    expected = classes(task_model())
    assert all(getattr(sys.modules[cls.__module__], cls.__qualname__, None) is cls for cls in expected.values())
    assert {nn.Linear, nn.Conv2d, nn.ConvTranspose2d} <= set(expected.values())
    for overrides, fp32_convs in POLICIES:
        for key, value in overrides.items():
            monkeypatch.setenv(key, value)
        model = task_model()
        assert classes(model) == expected, overrides
        apply_kernel_policy(model, fp32_convs=fp32_convs)
        assert classes(model) == expected, (overrides, fp32_convs)
        adapted = apply_lora(model, targets=('backbone.blocks.2.attn.proj',), rank=2)  # LoRA after the policy
        assert type(adapted.backbone.blocks[2].attn.proj).__name__ == 'LoRALinear'
        assert 'forward' not in vars(adapted.backbone.blocks[2].attn.proj)  # the plain Linear's routing left behind


@pytest.mark.parametrize('gemm', ['torch', 'onednn'])
def test_the_run_log_names_the_kernel_policy(tmp_path, monkeypatch, gemm):
    """A real quickstart run of one iteration: the runner applies the policy once and logs its choice."""
    monkeypatch.setenv('ZOO_CPU_GEMM', gemm)
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'onednn')
    train_tool.main(quick(tmp_path, 1))
    log = '\n'.join(p.read_text() for p in sorted(tmp_path.glob('2*/*.log')))
    lines = [line for line in log.splitlines() if 'kernel policy: ' in line]
    assert len(lines) == 1, lines
    assert f"fp32 GEMMs by {'oneDNN' if gemm == 'onednn' else 'torch (MKL)'} " in lines[0]
    assert f'ZOO_CPU_GEMM={gemm}' in lines[0] and 'ZOO_CONV_WEIGHT_GRAD=onednn' in lines[0]
    assert 'routed ' in lines[0] and ' nn.Linear and ' in lines[0]


@pytest.mark.parametrize('overrides,fp32_convs', POLICIES[:2])
def test_torch_compile_traces_a_routed_model_in_one_graph(monkeypatch, overrides, fp32_convs):
    """The routed Linears and convolutions take torch's kernels inside torch.compile without a graph break, in
    inference and in fp32 training (before the fix every product broke the graph on the policy's reading of
    /proc/cpuinfo, and every neck convolution on its weight-gradient timing: DPT ViT-B's compiled forward ran at
    0.47x eager on an H200)."""
    import torch
    torch._dynamo.reset()
    for key, value in overrides.items():
        monkeypatch.setenv(key, value)
    model = task_model()
    model.gemm_weight_grad_parts = ('neck', 'decode_head')  # the shifted-GEMM routing too, whatever the model says
    apply_kernel_policy(model, fp32_convs=fp32_convs)
    x = torch.randn(2, 3, 64, 64).contiguous(memory_format=torch.channels_last)
    model.to(memory_format=torch.channels_last)
    for train in (False, True):
        model.train(train)
        with torch.set_grad_enabled(train):
            explained = torch._dynamo.explain(model)(x, mode='tensor')
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), (
            train, [b.reason.splitlines()[0] for b in explained.break_reasons[:3]])
