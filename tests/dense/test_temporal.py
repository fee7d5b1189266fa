"""Temporal consistency of depth sequences (heads.evaluation.temporal): the flicker figure by hand, static pixels,
and the smoothed alignment lowering the figure where per-frame scale jitter is planted (hand-worked values)."""
import numpy as np
import pytest

from heads.evaluation.temporal import (
    SmoothedAlignment,
    TemporalConsistency,
    align_sequence,
    depth_of,
    depth_static,
    photometric_static,
    smooth_sequence,
    temporal_consistency,
)

#: One disparity map (non-constant, so that a scale and shift are determined) and the planted per-frame scales.
DISPARITY = np.linspace(0.2, 1.0, 48).reshape(6, 8)
JITTER = [1.0, 1.2, 0.9, 1.1]


def mean_ratio_change(scales) -> float:
    """Percent mean of |c_{i-1} / c_i - 1|: the figure of depths 1 / (c_i * d)."""
    return 100 * np.mean([abs(a / b - 1) for a, b in zip(scales[:-1], scales[1:])])


def test_the_figure_by_hand():
    d0 = np.array([[1.0, 2.0], [4.0, 8.0]])
    d1 = np.array([[1.1, 2.0], [4.0, 6.0]])
    d2 = np.array([[1.1, 0.0], [5.0, 6.0]])  # a hole: not counted
    images = [np.zeros((2, 2, 3), np.uint8) for _ in range(3)]
    images[1][1, 1] = 50  # this pixel changes in frame 1 only: not static for either pair
    # pair 0-1: (0.1/1 + 0 + 0) / 3; pair 1-2, also without the hole: (0 + 1/4) / 2
    expected = 100 * np.mean([0.1 / 3, 0.25 / 2])
    assert temporal_consistency([d0, d1, d2], images) == pytest.approx(expected)
    assert temporal_consistency([d0, d1], None) == pytest.approx(100 * (0.1 + 0.25) / 4)  # all pixels static
    meter = TemporalConsistency()
    assert np.isnan(meter.update(d0)) and np.isnan(meter.value)
    meter.update(d1, static=np.zeros((2, 2), bool))  # a pair without a static pixel is skipped
    meter.update(d2)
    assert meter.value == pytest.approx(100 * 0.25 / 3)


def test_static_pixels():
    a = np.full((1, 3, 3), 100, np.uint8)
    b = a.copy()
    b[0, 1] = (110, 110, 110)  # grey changes by 10: not below the threshold
    b[0, 2] = (109, 100, 100)  # grey changes by 0.299 * 9
    np.testing.assert_array_equal(photometric_static(a, b), [[True, False, True]])
    gt0, gt1 = np.array([1.0, 2.0, 0.0, 4.0]), np.array([1.01, 2.1, 3.0, 4.0])
    np.testing.assert_array_equal(depth_static(gt0, gt1), [True, False, False, True])  # 1 %, 5 %, hole, 0 %
    with pytest.raises(ValueError, match=r'consecutive frames differ in size: \(1, 3, 3\) then \(2, 3, 3\)'):
        photometric_static(a, np.zeros((2, 3, 3)))


def test_smoothing_lowers_planted_scale_jitter_without_ground_truth():
    predictions = [k * DISPARITY for k in JITTER]
    raw = temporal_consistency([depth_of(p, relative=True) for p in predictions])
    assert raw == pytest.approx(100 * np.mean([1 - 1 / 1.2, 1.2 / 0.9 - 1, 1 - 0.9 / 1.1]))  # 22.73 %
    smoothed = smooth_sequence(predictions, alpha=0.5)
    # c_0 = 1; c_i = 0.5 * k_i + 0.5 * c_{i-1}: 1.1, 1.0, 1.05
    for aligned, c in zip(smoothed, [1.0, 1.1, 1.0, 1.05]):
        np.testing.assert_allclose(aligned, c * DISPARITY, rtol=1e-12, atol=1e-12)
    figure = temporal_consistency([depth_of(p, relative=True) for p in smoothed])
    assert figure == pytest.approx(100 * np.mean([1 - 1 / 1.1, 0.1, 1 - 1 / 1.05]))  # 7.95 %
    assert figure < raw / 2
    # alpha = 1 is no smoothing: the raw predictions back
    for aligned, prediction in zip(smooth_sequence(predictions, alpha=1.0), predictions):
        np.testing.assert_allclose(aligned, prediction, rtol=1e-12, atol=1e-12)
    # metric depth, median scaling: the same moving average of the scales, in depth
    depths = [k / DISPARITY for k in JITTER]
    for aligned, c in zip(smooth_sequence(depths, alpha=0.5, mode='median'), [1.0, 1.1, 1.0, 1.05]):
        np.testing.assert_allclose(aligned, c / DISPARITY, rtol=1e-12)


def test_smoothing_against_a_jittering_ground_truth():
    depth = 1 / DISPARITY
    gains = [1.0, 1.1, 0.95, 1.05]  # the ground truth's scale jitters (a sensor's), the predictions' too
    gts = [g * depth for g in gains]
    predictions = [k * DISPARITY + 0.3 for k in JITTER]  # disparity up to scale and shift
    per_frame = smooth_sequence(predictions, gts, alpha=1.0)  # alignment to each frame's ground truth
    for aligned, g in zip(per_frame, gains):
        np.testing.assert_allclose(aligned, DISPARITY / g, rtol=1e-9)
    figure_per_frame = temporal_consistency([depth_of(p, True) for p in per_frame])
    assert figure_per_frame == pytest.approx(100 * np.mean([0.1, 1 - 0.95 / 1.1, 1.05 / 0.95 - 1]))
    # alpha = 0.5: the reference's disparity scale e_i = 0.5 / g_i + 0.5 * e_{i-1}, e_0 = 1 / g_0
    e = [1 / gains[0]]
    for g in gains[1:]:
        e.append(0.5 / g + 0.5 * e[-1])
    smoother = SmoothedAlignment(alpha=0.5)
    smoothed = [smoother(p, gt) for p, gt in zip(predictions, gts)]
    for aligned, scale in zip(smoothed, e):
        np.testing.assert_allclose(aligned, scale * DISPARITY, rtol=1e-9)
    np.testing.assert_allclose(smoother.scales, [s / k for s, k in zip(e, JITTER)], rtol=1e-9)
    figure = temporal_consistency([depth_of(p, True) for p in smoothed])
    assert figure == pytest.approx(mean_ratio_change(e))
    assert figure < 0.6 * figure_per_frame


def test_one_alignment_for_the_whole_sequence_keeps_the_flicker():
    gts = [1 / DISPARITY, 1.1 / DISPARITY]
    predictions = [2 * DISPARITY + 0.1, 2 * DISPARITY / 1.1 + 0.1]
    aligned = align_sequence(predictions, gts)
    np.testing.assert_allclose(aligned[0], DISPARITY, rtol=1e-9)
    np.testing.assert_allclose(aligned[1], DISPARITY / 1.1, rtol=1e-9)
    assert temporal_consistency([depth_of(p, True) for p in aligned]) == pytest.approx(10.0)


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r'alpha = 0 must be in \(0, 1\]'):
        SmoothedAlignment(alpha=0)
    with pytest.raises(ValueError, match="alignment mode 'affine' is not one of"):
        SmoothedAlignment(mode='affine')
    with pytest.raises(ValueError, match='no pixel is valid'):
        SmoothedAlignment()(np.zeros((2, 2)))
    smoother = SmoothedAlignment()
    smoother(DISPARITY)
    with pytest.raises(ValueError, match=r'frames differ in size: \(6, 8\) then \(8, 6\)'):
        smoother(DISPARITY.T)
    with pytest.raises(ValueError, match=r'one mask per consecutive pair \(1\), got 2'):
        temporal_consistency([DISPARITY, DISPARITY], statics=[None, None])
