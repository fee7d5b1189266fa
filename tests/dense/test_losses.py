"""The losses against values worked out here: by hand, with numpy least squares, or with plain loops."""
import math

import numpy as np
import pytest
import torch

from heads.losses import CrossEntropyLoss, ScaleShiftInvariantLoss, SiLogLoss, align_scale_shift


def nll(logits, label):
    """-log softmax(logits)[label] for one pixel, by hand."""
    return math.log(sum(math.exp(v) for v in logits)) - logits[label]


def pixels_to_logits(pixels):
    """[[k logits] per pixel] of one row -> '1 k 1 n' tensor."""
    return torch.tensor(pixels, dtype=torch.float32).T[None, :, None, :]


# ---------------------------------------------------------------- cross-entropy

def test_ce_ignores_the_ignored_pixel():
    logits = pixels_to_logits([[1.0, 2.0, 3.0], [0.5, 0.0, -1.0]])  # 1 3 1 2
    labels = torch.tensor([[[2, 255]]])
    expected = math.log(math.exp(1) + math.exp(2) + math.exp(3)) - 3
    torch.testing.assert_close(CrossEntropyLoss()(logits, labels), torch.tensor(expected))
    torch.testing.assert_close(CrossEntropyLoss(loss_weight=2.0)(logits, labels), torch.tensor(2 * expected))
    # without avg_non_ignore the ignored pixel still counts in the denominator
    torch.testing.assert_close(CrossEntropyLoss(avg_non_ignore=False)(logits, labels), torch.tensor(expected / 2))


def test_ce_class_weights_give_the_weighted_mean():
    pixels = [[1.0, 2.0, 3.0], [0.5, 0.0, -1.0], [2.0, -1.0, 0.0]]
    labels = torch.tensor([[[2, 0, 255]]])
    weights = [0.5, 1.0, 2.0]
    weighted_sum = weights[2] * nll(pixels[0], 2) + weights[0] * nll(pixels[1], 0)
    loss = CrossEntropyLoss(class_weight=weights)(pixels_to_logits(pixels), labels)
    torch.testing.assert_close(loss, torch.tensor(weighted_sum / (weights[2] + weights[0])))
    loss = CrossEntropyLoss(class_weight=weights, avg_non_ignore=False)(pixels_to_logits(pixels), labels)
    torch.testing.assert_close(loss, torch.tensor(weighted_sum / 3))


def test_ce_all_ignored_is_a_connected_zero():
    logits = torch.randn(2, 4, 3, 3, requires_grad=True)
    loss = CrossEntropyLoss()(logits, torch.full((2, 3, 3), 255))
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


@pytest.mark.parametrize('bad', [3, 7, -1])
def test_ce_out_of_range_label_raises(bad):
    labels = torch.tensor([[[0, 255, bad]]])
    with pytest.raises(ValueError, match=rf"\[{bad}\].*\[0, 3\)"):
        CrossEntropyLoss()(torch.zeros(1, 3, 1, 3), labels)


def test_ce_resizes_half_resolution_logits():
    logits = torch.randn(1, 2, 2, 2)
    labels = torch.randint(0, 2, (1, 4, 4))
    labels[0, 1, 2] = 255
    # bilinear x2, align_corners=False: output i samples input (i + 0.5) / 2 - 0.5, clamped to the border
    w = np.array([[1, 0], [0.75, 0.25], [0.25, 0.75], [0, 1]])
    up = np.einsum('ih,khw,jw->kij', w, logits[0].double().numpy(), w)  # k 4 4
    losses = [nll(up[:, i, j].tolist(), labels[0, i, j].item())
              for i in range(4) for j in range(4) if labels[0, i, j] != 255]
    torch.testing.assert_close(CrossEntropyLoss()(logits, labels), torch.tensor(sum(losses) / len(losses)))


# ---------------------------------------------------------------- scale-and-shift-invariant

def reference_ssi(pred, target, mask, alpha, scales):
    """MiDaS' loss with numpy least squares and explicit loops; arrays 'b h w', float64."""
    aligned = np.zeros_like(pred)
    for i in range(len(pred)):
        a = np.stack([pred[i][mask[i]], np.ones(mask[i].sum())], axis=1)
        (s, t), *_ = np.linalg.lstsq(a, target[i][mask[i]], rcond=None)
        aligned[i] = s * pred[i] + t
    r = np.where(mask, aligned - target, 0.0)
    data = (r[mask] ** 2).sum() / (2 * mask.sum())
    grad = 0.0
    for k in range(scales):
        rk, mk = r[:, ::2 ** k, ::2 ** k], mask[:, ::2 ** k, ::2 ** k]
        total = 0.0
        for b in range(rk.shape[0]):
            for i in range(rk.shape[1]):
                for j in range(rk.shape[2]):
                    if j + 1 < rk.shape[2] and mk[b, i, j] and mk[b, i, j + 1]:
                        total += abs(rk[b, i, j + 1] - rk[b, i, j])
                    if i + 1 < rk.shape[1] and mk[b, i, j] and mk[b, i + 1, j]:
                        total += abs(rk[b, i + 1, j] - rk[b, i, j])
        grad += total / mk.sum() if mk.sum() else 0.0
    return data + alpha * grad


PRED_4X4 = np.array([[0.5, 1.0, 2.0, 3.5],
                     [1.5, 0.2, 4.0, 2.5],
                     [3.0, 2.2, 0.7, 1.1],
                     [0.9, 5.0, 1.8, 2.6]])
MASK_4X4 = np.array([[1, 1, 0, 1],
                     [1, 1, 1, 1],
                     [0, 1, 1, 1],
                     [1, 1, 1, 0]], dtype=bool)


def test_ssi_exact_affine_target():
    pred = torch.tensor(PRED_4X4, dtype=torch.float32)[None]
    mask = torch.tensor(MASK_4X4)[None]
    target = torch.where(mask, 3 * pred + 2, 1e6)
    scale, shift = align_scale_shift(pred, target, mask)
    torch.testing.assert_close(scale, torch.tensor([3.0]))
    torch.testing.assert_close(shift, torch.tensor([2.0]))
    assert ScaleShiftInvariantLoss()(pred, target, mask).item() == pytest.approx(0.0, abs=1e-5)


def test_ssi_data_term_matches_least_squares():
    rng = np.random.default_rng(0)
    pred, target = rng.uniform(0.1, 5, (2, 6, 5)), rng.uniform(0.1, 5, (2, 6, 5))
    mask = rng.random((2, 6, 5)) < 0.7
    fits = [np.polyfit(pred[i][mask[i]], target[i][mask[i]], 1) for i in range(2)]  # [s, t] per image
    residuals = sum(((s * pred[i] + t - target[i])[mask[i]] ** 2).sum() for i, (s, t) in enumerate(fits))
    p, t, m = torch.tensor(pred, dtype=torch.float32), torch.tensor(target, dtype=torch.float32), torch.tensor(mask)
    scale, shift = align_scale_shift(p, t, m)
    torch.testing.assert_close(scale, torch.tensor([f[0] for f in fits], dtype=torch.float32))
    torch.testing.assert_close(shift, torch.tensor([f[1] for f in fits], dtype=torch.float32))
    loss = ScaleShiftInvariantLoss(alpha=0.0)(p[:, None], t[:, None], m[:, None])  # 'b 1 h w' as well
    torch.testing.assert_close(loss, torch.tensor(residuals / (2 * mask.sum()), dtype=torch.float32))


def test_ssi_ignores_garbage_under_the_mask():
    rng = np.random.default_rng(1)
    pred = torch.tensor(rng.uniform(0.1, 5, (2, 8, 8)), dtype=torch.float32)
    target = torch.tensor(rng.uniform(0.1, 5, (2, 8, 8)), dtype=torch.float32)
    mask = torch.tensor(rng.random((2, 8, 8)) < 0.6)
    garbage = torch.tensor([float('nan'), float('inf'), 1e6]).repeat(43)[:128].reshape(2, 8, 8)
    clean, dirty = pred.clone().requires_grad_(), torch.where(mask, pred, -garbage).requires_grad_()
    loss_fn = ScaleShiftInvariantLoss()
    loss_clean = loss_fn(clean, target, mask)
    loss_dirty = loss_fn(dirty, torch.where(mask, target, garbage), mask)
    torch.testing.assert_close(loss_dirty, loss_clean)
    (loss_clean + loss_dirty).backward()
    torch.testing.assert_close(dirty.grad, torch.where(mask, clean.grad, 0))
    assert torch.isfinite(dirty.grad).all()


@pytest.mark.parametrize('scales', [1, 2])
def test_ssi_gradient_term_matches_loops(scales):
    target = np.array([[1.0, 2.0, 0.5, 3.0],
                       [2.5, 1.0, 2.0, 0.3],
                       [4.0, 0.8, 1.2, 2.2],
                       [0.6, 3.3, 1.7, 0.9]])
    expected = reference_ssi(PRED_4X4[None], target[None], MASK_4X4[None], alpha=0.5, scales=scales)
    data_only = reference_ssi(PRED_4X4[None], target[None], MASK_4X4[None], alpha=0.0, scales=scales)
    assert expected > data_only  # the example has a non-zero gradient term
    as_tensor = lambda a: torch.tensor(a, dtype=torch.float32)[None]  # noqa: E731
    loss = ScaleShiftInvariantLoss(alpha=0.5, scales=scales)(
        as_tensor(PRED_4X4), as_tensor(target), torch.tensor(MASK_4X4)[None])
    torch.testing.assert_close(loss, torch.tensor(expected, dtype=torch.float32))


def test_ssi_batch_at_several_scales_matches_loops():
    rng = np.random.default_rng(2)
    pred, target = rng.uniform(0.1, 5, (3, 9, 7)), rng.uniform(0.1, 5, (3, 9, 7))
    mask = rng.random((3, 9, 7)) < 0.8
    expected = reference_ssi(pred, target, mask, alpha=0.5, scales=3)
    loss = ScaleShiftInvariantLoss(alpha=0.5, scales=3, loss_weight=2.0)(
        torch.tensor(pred, dtype=torch.float32), torch.tensor(target, dtype=torch.float32), torch.tensor(mask))
    torch.testing.assert_close(loss, torch.tensor(2 * expected, dtype=torch.float32))


def test_ssi_degenerate_cases():
    target = torch.rand(2, 4, 4)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[1] = False
    scale, shift = align_scale_shift(torch.full((2, 4, 4), 2.7), target, mask)  # constant pred; empty mask
    assert torch.equal(scale, torch.zeros(2)) and torch.equal(shift, torch.zeros(2))
    pred = torch.rand(1, 1, 4, 4, requires_grad=True)
    loss = ScaleShiftInvariantLoss()(pred, target[:1, None], torch.zeros(1, 1, 4, 4, dtype=torch.bool))
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(pred.grad, torch.zeros_like(pred))


# ---------------------------------------------------------------- SiLog

def test_silog_matches_the_formula():
    rng = np.random.default_rng(3)
    pred, target = rng.uniform(0.1, 10, (2, 1, 5, 6)), rng.uniform(0.1, 10, (2, 1, 5, 6))
    target[0, 0, 0, :3] = 0.0  # no ground truth: excluded even where the mask is set
    mask = rng.random((2, 1, 5, 6)) < 0.7
    mask[0, 0, 0, :3] = True
    valid = mask & (target > 0)
    d = np.log(pred[valid] + 1e-6) - np.log(target[valid] + 1e-6)
    expected = math.sqrt((d ** 2).mean() - 0.85 * d.mean() ** 2)
    loss = SiLogLoss()(torch.tensor(pred, dtype=torch.float32), torch.tensor(target, dtype=torch.float32),
                       torch.tensor(mask))
    torch.testing.assert_close(loss, torch.tensor(expected, dtype=torch.float32))


def test_silog_zero_cases_keep_finite_gradients():
    target = torch.rand(2, 1, 4, 4) + 0.5
    mask = torch.rand(2, 1, 4, 4) < 0.5
    for m in (mask, torch.zeros_like(mask)):  # pred == target; no valid pixel
        pred = target.clone().requires_grad_()
        loss = SiLogLoss()(pred, target, m)
        assert loss.item() == 0.0
        loss.backward()
        assert torch.equal(pred.grad, torch.zeros_like(pred))


# ---------------------------------------------------------------- float32 under autocast

def ce_inputs():
    labels = torch.randint(0, 4, (2, 8, 8))
    labels[0, :2] = 255
    return torch.randn(2, 4, 4, 4), labels  # half-resolution logits: the resize runs under autocast too


def depth_inputs():
    pred, target = torch.rand(2, 1, 8, 8) + 0.1, 3 * torch.rand(2, 1, 8, 8) + 0.1
    return pred, target, torch.rand(2, 1, 8, 8) < 0.7


@pytest.mark.parametrize('loss_fn, make_inputs', [
    (CrossEntropyLoss(class_weight=[1.0, 0.5, 2.0, 1.5]), ce_inputs),
    (ScaleShiftInvariantLoss(), depth_inputs),
    (SiLogLoss(), depth_inputs),
])
def test_losses_compute_in_float32_under_autocast(loss_fn, make_inputs):
    inputs = [x.bfloat16() if x.is_floating_point() else x for x in make_inputs()]
    with torch.autocast('cpu', dtype=torch.bfloat16):
        loss = loss_fn(*inputs)
    assert loss.dtype == torch.float32
    expected = loss_fn(*[x.float() if x.is_floating_point() else x for x in inputs])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=0)
