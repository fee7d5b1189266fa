"""The `deterministic` option: resizing as matrix products (what CUDA runs under deterministic algorithms,
since its bilinear/bicubic backward is not deterministic) equals F.interpolate, and --deterministic training
on CPU repeats to the bit."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from zoo.core.resize import interpolate, matrix_interpolate

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402

CASES = [dict(size=(14, 18), mode='bilinear', align_corners=False),
         dict(scale_factor=2, mode='bilinear', align_corners=True),  # DPT's fusion upsampling
         dict(scale_factor=1.7, mode='bilinear', align_corners=False),
         dict(size=(5, 20), mode='bicubic', align_corners=False),  # position-table resampling
         dict(size=(3, 4), mode='bilinear', align_corners=False, antialias=True),  # CrossViT's downsampling
         dict(size=(4, 13), mode='bicubic', align_corners=False, antialias=True)]


@pytest.mark.parametrize('case', CASES, ids=lambda c: '-'.join(f'{k}={v}' for k, v in c.items()))
def test_matrix_resize_equals_interpolate_forward_and_backward(case):
    x = torch.randn(2, 3, 7, 9, dtype=torch.float64, requires_grad=True)
    expected = F.interpolate(x, **case)
    out = matrix_interpolate(x, **case)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    upstream = torch.randn_like(expected)
    expected_grad, = torch.autograd.grad(expected, x, upstream)
    grad, = torch.autograd.grad(out, x, upstream)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-12)


def test_other_modes_are_not_taken_by_the_matrix_path():
    with pytest.raises(ValueError, match="not 'nearest'"):
        matrix_interpolate(torch.zeros(1, 1, 2, 2), size=(4, 4), mode='nearest')
    x = torch.arange(4.0).view(1, 1, 2, 2)
    assert torch.equal(interpolate(x, scale_factor=2), F.interpolate(x, scale_factor=2))


@pytest.fixture
def restore_determinism():
    yield
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize('head', [dict(type='DPTSegHead', num_classes=3, in_channels=16),
                                  dict(type='DPTDepthHead', in_channels=16)])
def test_the_heads_resize_through_the_deterministic_path_when_asked(head, monkeypatch, restore_determinism):
    """CUDA has no deterministic backward for bilinear resizing, so there every resize must go through
    zoo.core.resize. Checked on CPU by the dispatch: with this device counted as one whose backward is not
    deterministic, a head's forward and backward resize only by matrix products, with the same outputs."""
    from heads.registry import MODELS
    from zoo.core import resize
    torch.manual_seed(0)
    module = MODELS.build(head).eval()
    x = torch.randn(1, 16, 6, 8, requires_grad=True)
    expected = module(x)
    calls = []
    monkeypatch.setattr(resize, 'NONDETERMINISTIC_BACKWARD', {'cpu'})
    monkeypatch.setattr(resize, 'matrix_interpolate', lambda *a, **k: calls.append(k) or matrix_interpolate(*a, **k))
    torch.use_deterministic_algorithms(True)
    with RecordOps() as ops:
        out = module(x)
        out.sum().backward()
    assert calls and out.shape[-2:] == (12, 16)
    assert not [op for op in ops.names if 'upsample' in op and 'backward' in op], sorted(ops.names)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


class RecordOps(TorchDispatchMode):
    """The aten operators run inside the block (e.g. 'aten.upsample_bilinear2d_backward.default', which CUDA cannot
    run deterministically)."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.slow
def test_deterministic_training_repeats_to_the_bit(tmp_path, monkeypatch, restore_determinism):
    monkeypatch.chdir(ROOT)
    weights = []
    for run in ('a', 'b'):
        runner = train_tool.main(['configs/quickstart.py', '--deterministic', '--work-dir', str(tmp_path / run),
                                  '--cfg-options', 'train_cfg.max_iters=3', 'train_cfg.val_interval=3',
                                  'default_hooks.checkpoint.interval=3', 'model.backbone.drop_path_rate=0.1',
                                  'train_dataloader.batch_size=4', 'train_dataloader.dataset.num_samples=8',
                                  'val_dataloader.dataset.num_samples=4'])
        assert runner.cfg.randomness == dict(seed=0, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        weights.append(torch.load(tmp_path / run / 'iter_3.pth', weights_only=True)['state_dict'])
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
