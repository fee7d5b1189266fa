"""Video Depth Anything's training loss (heads.losses.VideoDepthLoss) against the authors' ``VideoDepthLoss`` and
``TemporalGradientMatchingLoss``: tests/reference_data/vda_loss_authors.pt holds their values and gradients on small
seeded clips with holes in the mask (one with a frame without any valid pixel), made by
tests/reference_data/vda_loss_authors.py at their commit 4f5ae23."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from heads.losses import VideoDepthLoss
from heads.losses.video_depth import robust_normalize, temporal_gradient_matching, trimmed_mae
from heads.registry import MODELS

REFERENCE = Path(__file__).resolve().parents[1] / 'reference_data' / 'vda_loss_authors.pt'


@pytest.fixture(scope='module')
def cases():
    return torch.load(REFERENCE, weights_only=True)['cases']


def ours(case):
    """Our total (and terms) and its gradient w.r.t. the prediction for a reference case."""
    pred = case['pred'].clone().requires_grad_()
    if case['kind'] == 'video':
        kwargs = dict(case['kwargs'])
        if 'stable_scale' in kwargs:
            kwargs['temporal_weight'] = kwargs.pop('stable_scale')
        terms = VideoDepthLoss(**kwargs).terms(pred, case['target'], case['mask'])
        values = dict(spatial_loss=terms['spatial'], stable_loss=terms['temporal'])
        values['total_loss'] = values['spatial_loss'] + values['stable_loss']
    else:
        k = case['kwargs']
        mask = case['mask']
        total = temporal_gradient_matching(torch.where(mask, pred, 0), torch.where(mask, case['target'], 0), mask,
                                           k['trim'], k['temp_grad_scales'], k['temp_grad_decay'], k['diff_depth_th'])
        values = dict(total_loss=total)
    values['total_loss'].backward()
    return values, pred.grad


@pytest.mark.parametrize('name', ['defaults', 'empty_frame', 'trimmed', 'temporal_strides'])
def test_the_authors_loss_values_and_gradients(cases, name):
    case = cases[name]
    values, grad = ours(case)
    for key, want in case['values'].items():
        torch.testing.assert_close(values[key].detach(), want, rtol=1e-5, atol=0, msg=f'{name} {key}')
    want = case['grad']
    assert (grad - want).abs().max() <= 1e-5 * want.abs().max(), name


def test_registered_and_the_same_as_its_terms(cases):
    case = cases['defaults']
    assert MODELS.module_dict['VideoDepthLoss'] is VideoDepthLoss  # (a build would import every part: seconds)
    loss_fn = VideoDepthLoss(loss_weight=2.0)
    total = loss_fn(case['pred'], case['target'], case['mask'])
    torch.testing.assert_close(total, 2 * case['values']['total_loss'], rtol=1e-5, atol=0)
    assert loss_fn.clip_loss


def test_garbage_under_the_mask_reaches_neither_value_nor_gradient(cases):
    case = cases['empty_frame']
    mask = case['mask']
    clean = torch.where(mask, case['pred'], 0).requires_grad_()
    dirty = torch.where(mask, case['pred'], torch.tensor([float('nan'), float('inf')]).repeat(
        mask.numel() // 2).reshape(mask.shape)).requires_grad_()
    loss_fn = VideoDepthLoss()
    loss_clean, loss_dirty = loss_fn(clean, case['target'], mask), loss_fn(dirty, case['target'], mask)
    torch.testing.assert_close(loss_dirty, loss_clean)
    (loss_clean + loss_dirty).backward()
    assert torch.isfinite(dirty.grad).all()
    torch.testing.assert_close(dirty.grad, torch.where(mask, clean.grad, 0))


def test_a_clip_equal_to_an_affine_map_of_its_target_costs_nothing():
    target = torch.rand(2, 3, 8, 8) + 0.5
    mask = torch.rand(2, 3, 8, 8) > 0.2
    pred = (3 * target + 1).requires_grad_()
    terms = VideoDepthLoss().terms(pred, target, mask)
    assert max(abs(terms['spatial'].item()), abs(terms['temporal'].item())) < 1e-5


def test_empty_masks_and_single_frames_give_connected_zeros():
    pred = torch.rand(1, 1, 6, 6, requires_grad=True)
    for mask in (torch.zeros(1, 1, 6, 6, dtype=torch.bool), torch.ones(1, 1, 6, 6, dtype=torch.bool)):
        terms = VideoDepthLoss().terms(pred, torch.rand(1, 1, 6, 6), mask)
        assert terms['temporal'].item() == 0.0  # one frame: no frame-to-frame change
        sum(terms.values()).backward()
        assert torch.isfinite(pred.grad).all()
    assert VideoDepthLoss()(pred, torch.rand(1, 1, 6, 6), torch.zeros(1, 1, 6, 6, dtype=torch.bool)).item() == 0.0


def test_parts():
    x = torch.tensor([[[0.0, 1.0], [2.0, 7.0]]])
    mask = torch.tensor([[[False, True], [True, True]]])
    # the median over the whole image with the invalid pixel as 0: lower middle of (0, 1, 2, 7) = 1;
    # the mean |x - 1| over the valid pixels: (0 + 1 + 6) / 3
    torch.testing.assert_close(robust_normalize(x, mask), (x - 1) / (7 / 3))
    residual = torch.tensor([[[9.0, -1.0], [3.0, -2.0]]])
    assert trimmed_mae(residual, mask).item() == pytest.approx(6 / 3)
    assert trimmed_mae(residual, mask, trim=0.34).item() == pytest.approx(1 / 3)  # int(3 * 0.66) = 1 kept, / 3
    with pytest.raises(ValueError, match="clips 'b t h w'"):
        VideoDepthLoss()(x, x, mask)
    with pytest.raises(ValueError, match='trim'):
        VideoDepthLoss(trim=1.0)


def test_float32_under_autocast(cases):
    case = cases['defaults']
    with torch.autocast('cpu', dtype=torch.bfloat16):
        loss = VideoDepthLoss()(case['pred'].bfloat16(), case['target'].bfloat16(), case['mask'])
    assert loss.dtype == torch.float32
    expected = VideoDepthLoss()(case['pred'].bfloat16().float(), case['target'].bfloat16().float(), case['mask'])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=0)
