"""Switches that change how a model runs, not what it computes: checkpointing, explicit attention, fp32 convs."""
import pytest
import torch
from torch import nn

import zoo
from zoo.core import (
    Attention,
    set_fused_attention,
    set_grad_checkpointing,
)
from zoo.profiling import peak_memory
from zoo.runtime import apply_kernel_policy

SMALL = {
    'vit': ('vit_tiny_patch16_224', dict(depth=2, out_indices=(0, 1))),
    'cvt': ('cvt_13_224', dict(depths=(1, 1, 2))),
    'coatnet': ('coatnet_0_rw_224', dict(depths=(1, 1, 2, 2), embed_dims=(16, 32, 64, 128), stem_widths=(8, 16))),
    'crossvit': ('crossvit_tiny_240', dict(depths=((1, 1, 0), (1, 1, 0)), out_indices=(0, 0, 1, 1))),
    'swin': ('swinv2_tiny_window8_256', dict(depths=(2, 2, 2, 2), embed_dim=16, num_heads=(1, 2, 4, 8))),
}
INPUT = {'vit': 64, 'cvt': 64, 'coatnet': 64, 'crossvit': 96, 'swin': 64}


def saved_tensor_count(model, x) -> int:
    """How many tensors autograd keeps for backward during the forward."""
    count = 0

    def pack(t):
        nonlocal count
        count += 1
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    return count, out


@pytest.mark.parametrize('family', sorted(SMALL))
def test_checkpointing_keeps_fewer_activations_and_gives_the_same_gradients(family):
    name, options = SMALL[family]
    torch.manual_seed(0)
    plain = zoo.create_backbone(name, drop_path_rate=0.0, **options).train()
    ckpt = zoo.create_backbone(name, drop_path_rate=0.0, grad_checkpointing=True, **options).train()
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, INPUT[family], INPUT[family])
    kept = {}
    for label, model in (('plain', plain), ('ckpt', ckpt)):
        kept[label], maps = saved_tensor_count(model, x)
        sum(m.square().mean() for m in maps).backward()
    assert kept['ckpt'] < kept['plain'] / 2, kept
    for (key, a), b in zip(plain.named_parameters(), ckpt.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=key)


def test_checkpointing_is_off_in_eval_and_can_be_switched_off():
    model = set_grad_checkpointing(zoo.create_backbone('vit_tiny_patch16_224', depth=2, out_indices=(0, 1)).eval())
    x = torch.randn(1, 3, 32, 32, requires_grad=True)
    eval_count, _ = saved_tensor_count(model, x)
    model.train()
    set_grad_checkpointing(model, False)
    plain_count, _ = saved_tensor_count(model, x)
    assert eval_count == plain_count


def test_explicit_attention_gives_the_sdpa_result_with_memory_quadratic_in_tokens():
    attn = Attention(64, num_heads=4).eval()
    peaks = {}
    for n in (256, 1024):
        x = torch.randn(1, n, 64)
        for fused in (True, False):
            set_fused_attention(attn, fused)
            with torch.inference_mode(), peak_memory('cpu') as mem:
                out = attn(x)
            peaks[n, fused] = mem['peak_mib'] * 2 ** 20
            if not fused:
                set_fused_attention(attn, True)
                torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=1e-4)
    # explicit: at least the 'heads n n' fp32 score matrix; SDPA: no n^2 term at all
    assert peaks[1024, False] >= 4 * 1024 ** 2 * 4
    assert peaks[1024, True] < 4 * 1024 ** 2 * 4 / 8
    assert peaks[1024, True] / peaks[256, True] < 5  # linear: 4x tokens, about 4x memory
    assert peaks[1024, False] / peaks[256, False] > 10  # quadratic: 4x tokens, up to 16x memory


def test_convs_stay_fp32_under_cpu_autocast_with_the_same_weights():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=8))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, 16, 16)
    expected = model(x)
    classes = [type(m) for m in model]
    apply_kernel_policy(model, fp32_convs=True)
    assert [type(m) for m in model] == classes and model.state_dict().keys() == state.keys()
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = model(x.bfloat16())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)  # input rounded to bf16 only
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert nn.Linear(8, 8)(torch.randn(2, 8)).dtype == torch.bfloat16  # the rest of autocast is untouched
    torch.testing.assert_close(model(x), expected)  # outside autocast: the plain convolution


def test_transposed_convs_stay_fp32_under_cpu_autocast_with_bf16_weights():
    """bf16 weights (what FSDP's param_dtype gathers) included: computed as fp32 from the bf16 values, with
    output_size honoured."""
    up = nn.ConvTranspose2d(4, 4, 2, stride=2).to(torch.bfloat16)
    weight, bias = up.weight.float(), up.bias.float()
    apply_kernel_policy(up, fp32_convs=True)
    assert type(up) is nn.ConvTranspose2d
    x = torch.randn(1, 4, 5, 5)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = up(x, output_size=(11, 11))
    assert out.dtype == torch.float32 and out.shape[-2:] == (11, 11)
    expected = torch.nn.functional.conv_transpose2d(x, weight, bias, stride=2, output_padding=1)
    torch.testing.assert_close(out, expected)


def test_every_convolution_of_a_task_model_stays_fp32_under_cpu_autocast():
    """As the kernel policy does on a CPU without bf16 convolution kernels (forced here, whatever this CPU has)."""
    import heads
    model = heads.MODELS.build(dict(
        type='Segmentor', backbone=dict(type='ZooBackbone', name='cvt_13_224', depths=(1, 1, 1)),
        neck=dict(type='DPTNeck', hidden_channels=(8, 16, 32, 32), fusion_channels=16),
        decode_head=dict(type='DPTSegHead', num_classes=3, in_channels=16),
        auxiliary_head=dict(type='DPTSegHead', num_classes=3, in_channels=16, upsample=False)))
    classes = {name: type(m) for name, m in model.named_modules()}
    apply_kernel_policy(model, fp32_convs=True)
    assert {name: type(m) for name, m in model.named_modules()} == classes
    convs = {name: m for name, m in model.named_modules() if type(m) in (nn.Conv2d, nn.ConvTranspose2d)}
    kernels = {name: vars(m).get('_conv_forward') or vars(m).get('forward') for name, m in convs.items()}
    plain = [name for name, kernel in kernels.items() if kernel is None or not getattr(kernel, 'fp32', True)]
    assert convs and not plain, plain
    assert any(name.startswith('auxiliary_head.') for name in convs)
