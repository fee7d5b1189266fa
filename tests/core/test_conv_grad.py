"""Convolution weight gradients as shifted GEMMs (zoo.runtime.conv_grad) equal autograd's through nn.Conv2d."""
import pytest
import torch
from torch import nn

from zoo.core import StdConv2d
from zoo.runtime import apply_kernel_policy, conv_grad
from zoo.runtime.conv_grad import conv_weight_grad, takes_shift_gemm
from zoo.runtime.convs import route_conv


@pytest.fixture(autouse=True)
def shift_gemm_chosen(monkeypatch):
    """The GEMMs taken whatever this CPU's measurement chose (the choice itself: test_choice_*)."""
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'gemm')


def shift_gemm_weight_grads(conv: nn.Conv2d) -> nn.Conv2d:
    """``conv`` routed as the kernel policy routes a DPT neck's convolutions (its class unchanged)."""
    cls = type(conv)
    assert route_conv(conv, fp32=False, gemm=True) and type(conv) is cls
    return conv


def counting(monkeypatch) -> list:
    """The shapes of the weight gradients computed by shifted GEMMs from now on."""
    calls, real = [], conv_grad.conv_weight_grad
    monkeypatch.setattr(conv_grad, 'conv_weight_grad', lambda x, *a: calls.append(x.shape) or real(x, *a))
    return calls


CASES = [  # n, c_in, c_out, kernel, padding, h, w
    (2, 5, 7, (3, 3), (1, 1), 9, 11), (1, 4, 3, (1, 1), (0, 0), 6, 5), (3, 6, 4, (5, 5), (2, 2), 7, 8),
    (2, 3, 4, (3, 3), (0, 0), 8, 6), (1, 2, 3, (4, 4), (1, 1), 7, 9), (2, 3, 3, (3, 5), (2, 1), 5, 6)]


@pytest.mark.parametrize('n, c, o, kernel, padding, h, w', CASES)
def test_weight_gradient_equals_autograd_in_float64(n, c, o, kernel, padding, h, w):
    torch.manual_seed(0)
    conv = nn.Conv2d(c, o, kernel, padding=padding).double()
    x = torch.randn(n, c, h, w, dtype=torch.double)
    y = conv(x)
    grad = torch.randn_like(y)
    y.backward(grad)
    for layout in (torch.contiguous_format, torch.channels_last):
        ours = conv_weight_grad(x.contiguous(memory_format=layout), grad.contiguous(memory_format=layout), kernel,
                                padding)
        assert ours.shape == conv.weight.shape
        torch.testing.assert_close(ours, conv.weight.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('weight_layout', [torch.contiguous_format, torch.channels_last])
def test_module_trains_like_nn_conv2d(weight_layout, monkeypatch):
    """Same outputs (bitwise: the forward is oneDNN's either way), same input gradient (bitwise), weight and bias
    gradients within float32 rounding; the state dict is untouched."""
    torch.manual_seed(0)
    ref = nn.Conv2d(8, 6, 3, padding=1).to(memory_format=weight_layout)
    conv = nn.Conv2d(8, 6, 3, padding=1).to(memory_format=weight_layout)
    conv.load_state_dict(ref.state_dict())
    shift_gemm_weight_grads(conv)
    assert conv.state_dict().keys() == ref.state_dict().keys()
    calls = counting(monkeypatch)
    x = torch.randn(2, 8, 12, 10).contiguous(memory_format=torch.channels_last)
    assert takes_shift_gemm(conv, x, conv.weight)
    xs, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    ys, yr = conv(xs), ref(xr)
    grad = torch.randn_like(yr)
    ys.backward(grad)
    yr.backward(grad)
    assert torch.equal(ys, yr) and torch.equal(xs.grad, xr.grad) and calls == [x.shape]
    torch.testing.assert_close(conv.weight.grad, ref.weight.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(conv.bias.grad, ref.bias.grad, rtol=1e-5, atol=1e-5)
    assert conv.weight.grad.is_contiguous(memory_format=weight_layout)


def test_other_convolutions_and_modes_take_the_plain_path():
    conv = shift_gemm_weight_grads(nn.Conv2d(4, 4, 3, padding=1))
    x = torch.randn(1, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    assert takes_shift_gemm(conv, x, conv.weight)
    assert not takes_shift_gemm(conv, x.contiguous(), conv.weight)  # oneDNN's NCHW kernel is fast
    with torch.no_grad():
        assert not takes_shift_gemm(conv, x, conv.weight)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert not takes_shift_gemm(conv, x, conv.weight)
    for other in (nn.Conv2d(4, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, padding=2, dilation=2),
                  nn.Conv2d(4, 4, 3, padding=1, groups=2), nn.Conv2d(4, 4, 3, padding='same'),
                  nn.Conv2d(4, 4, 3, padding=1, padding_mode='reflect')):
        assert not takes_shift_gemm(shift_gemm_weight_grads(other), x, other.weight), other


def test_subclasses_keep_their_own_forward(monkeypatch):
    """A subclass with its own forward (here the weight-standardised conv) keeps its class, behaviour and
    gradients."""
    torch.manual_seed(0)
    ref, conv = StdConv2d(4, 6, 3, padding=1), StdConv2d(4, 6, 3, padding=1)
    conv.load_state_dict(ref.state_dict())
    shift_gemm_weight_grads(conv)
    calls = counting(monkeypatch)
    x = torch.randn(2, 4, 9, 7).contiguous(memory_format=torch.channels_last)
    ys, yr = conv(x), ref(x)
    torch.testing.assert_close(ys, yr, rtol=0, atol=1e-6)
    grad = torch.randn_like(yr)
    ys.backward(grad)
    yr.backward(grad)
    torch.testing.assert_close(conv.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
    assert calls == []  # its forward calls F.conv2d itself, not _conv_forward: routing leaves it as it computes


def test_dense_models_use_it_in_neck_and_head():
    from heads.registry import MODELS
    backbone = dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, img_size=64, out_indices=(0, 1, 2, 3))
    model = MODELS.build(dict(type='Segmentor', backbone=backbone,
                              neck=dict(type='DPTNeck', hidden_channels=(16, 16, 16, 16), fusion_channels=16),
                              decode_head=dict(type='DPTSegHead', in_channels=16, num_classes=3)))
    classes = {name: type(m) for name, m in model.named_modules()}
    apply_kernel_policy(model)
    assert {name: type(m) for name, m in model.named_modules()} == classes
    convs = [m for m in [*model.neck.modules(), *model.decode_head.modules()] if isinstance(m, nn.Conv2d)]
    assert convs and all(vars(m)['_conv_forward'].gemm for m in convs)
    assert not any(getattr(vars(m).get('_conv_forward'), 'gemm', False) for m in model.backbone.modules())


def test_choice_follows_the_measurement_and_the_environment(monkeypatch):
    monkeypatch.setattr(conv_grad, '_pinned', None)
    conv = shift_gemm_weight_grads(nn.Conv2d(4, 4, 3, padding=1))
    x = torch.randn(1, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'onednn')
    assert not takes_shift_gemm(conv, x, conv.weight) and conv_grad.decided() == 'onednn'
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'auto')
    speedup = conv_grad.shift_gemm_speedup()
    assert speedup > 0 and conv_grad.shift_gemm_speedup() == speedup  # measured once per process
    assert takes_shift_gemm(conv, x, conv.weight) == (speedup >= conv_grad.MIN_SPEEDUP)
    assert conv_grad.decided() == ('gemm' if speedup >= conv_grad.MIN_SPEEDUP else 'onednn')
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'fastest')
    with pytest.raises(ValueError, match="ZOO_CONV_WEIGHT_GRAD must be one of .*'fastest'"):
        takes_shift_gemm(conv, x, conv.weight)


def test_deterministic_algorithms_take_torchs_kernel_without_timing(monkeypatch):
    monkeypatch.delenv('ZOO_CONV_WEIGHT_GRAD', raising=False)
    monkeypatch.setattr(conv_grad, '_pinned', None)
    conv_grad.shift_gemm_speedup.cache_clear()
    conv = shift_gemm_weight_grads(nn.Conv2d(4, 4, 3, padding=1))
    x = torch.randn(1, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    torch.use_deterministic_algorithms(True)
    try:
        assert not takes_shift_gemm(conv, x, conv.weight) and conv_grad.decided() == 'onednn'
    finally:
        torch.use_deterministic_algorithms(False)
    assert conv_grad.shift_gemm_speedup.cache_info().currsize == 0  # nothing was timed
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'gemm')  # the environment still forces the GEMMs
    torch.use_deterministic_algorithms(True)
    try:
        assert takes_shift_gemm(conv, x, conv.weight)
    finally:
        torch.use_deterministic_algorithms(False)


def test_a_resumed_run_takes_the_choice_its_checkpoint_recorded(monkeypatch):
    """The process that wrote the checkpoint used the GEMMs; the resuming one measured the other way: after the
    resume it uses the GEMMs too (RngStateHook records and restores the choice with the generator state)."""
    from types import SimpleNamespace

    from heads.engine.checkpoints.rng_state import RngStateHook
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'gemm')
    monkeypatch.setattr(conv_grad, '_pinned', None)
    conv = shift_gemm_weight_grads(nn.Conv2d(4, 4, 3, padding=1))
    x = torch.randn(1, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    assert takes_shift_gemm(conv, x, conv.weight)
    checkpoint = {'meta': {'iter': 4}}
    RngStateHook().before_save_checkpoint(None, checkpoint)
    assert checkpoint['torch_rng_state']['conv_weight_grad'] == 'gemm'
    checkpoint = torch.load(_saved(checkpoint), weights_only=True)  # as the resume reads it

    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'auto')
    monkeypatch.setattr(conv_grad, 'shift_gemm_speedup', lambda: 0.5)  # this process's timing went the other way
    assert not takes_shift_gemm(conv, x, conv.weight)
    hook = RngStateHook()
    hook.after_load_checkpoint(None, checkpoint)
    hook.before_train_iter(SimpleNamespace(iter=4), 0)
    assert takes_shift_gemm(conv, x, conv.weight) and conv_grad.decided() == 'gemm'
    hook.after_run(None)  # the run is over: later runs of this process choose for themselves
    assert not takes_shift_gemm(conv, x, conv.weight)
    with pytest.raises(ValueError, match="'gemm' or 'onednn', got 'fast'"):
        conv_grad.pin('fast')


def _saved(checkpoint: dict):
    import io
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    return buffer


def _agree_on_the_kernel(rank: int, port: int, out) -> None:
    """One process of a two-process gloo group: its timing goes its own way (rank 0: the GEMMs win, rank 1: oneDNN),
    then RngStateHook.before_train runs as at the start of a distributed run."""
    import os
    from types import SimpleNamespace

    import torch.distributed as dist

    from heads.engine.checkpoints.rng_state import RngStateHook
    os.environ.pop('ZOO_CONV_WEIGHT_GRAD', None)
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=2)
    conv_grad.shift_gemm_speedup = lambda: 3.0 if rank == 0 else 0.5
    before = conv_grad.choice()
    hook = RngStateHook()
    hook.before_train(SimpleNamespace(model=nn.Conv2d(4, 4, 3)))
    during = conv_grad.choice()
    hook.after_run(None)
    out.put((rank, before, during, conv_grad.choice()))
    dist.destroy_process_group()


def test_the_processes_of_a_distributed_cpu_run_take_rank_0s_kernel_choice():
    """Each process would time the kernels itself and could choose the other one near the margin: the gradients
    then sum differently per rank, and a resume (which restores rank 0's recorded choice everywhere) stops being bit
    for bit. RngStateHook.before_train makes every process take rank 0's choice for the run."""
    import socket

    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    context = mp.get_context('spawn')
    out = context.Queue()
    processes = [context.Process(target=_agree_on_the_kernel, args=(rank, port, out)) for rank in range(2)]
    for p in processes:
        p.start()
    results = sorted(out.get(timeout=120) for _ in processes)
    for p in processes:
        p.join(timeout=60)
    assert results == [(0, 'gemm', 'gemm', 'gemm'), (1, 'onednn', 'gemm', 'onednn')]
