"""Temporal alignment error (heads.evaluation.tae): equal to Video Depth Anything's own ``eval_TAE`` on the sequences
of tests/reference_data/vda_tae_authors.pt (made by tests/reference_data/vda_tae_authors.py with their code at commit
4f5ae23: collisions, points behind the camera, both of their ``return 0`` cases, masks), the splat's collision rule
shown to matter there, and properties worked by hand: ~0 for a perfect prediction under a pure camera rotation (and
not for the inverse pose), the formula on a two-frame sequence."""
from pathlib import Path

import numpy as np
import pytest
import torch

from heads.evaluation import tae
from heads.evaluation.tae import aligned_depth, pair_error, project_depth, splat, temporal_alignment_error

REFERENCE = Path(__file__).resolve().parents[1] / 'reference_data' / 'vda_tae_authors.pt'


@pytest.fixture(scope='module')
def reference():
    return torch.load(REFERENCE, weights_only=False)


def inputs(reference, name: str) -> tuple:
    """(predictions, gts, poses, intrinsics, max_depth, masks) of a reference sequence, as their eval reads them."""
    case = reference[name]
    masks = None if case['masks'] is None else case['masks'].numpy()
    return (case['predictions'].numpy(), case['gt_raw'].numpy() / reference['factor'], case['poses'].numpy(),
            reference['K'].numpy(), case['max_depth'], masks)


@pytest.mark.parametrize('name', ['motion', 'edges'])
def test_equal_to_the_authors_eval(reference, name):
    ours = temporal_alignment_error(*inputs(reference, name))
    assert ours == pytest.approx(reference[name]['tae'], rel=1e-6)


def test_torch_tensors_and_per_frame_intrinsics_give_the_same(reference):
    predictions, gts, poses, k, max_depth, _ = inputs(reference, 'motion')
    ours = temporal_alignment_error(torch.from_numpy(predictions), list(torch.from_numpy(gts)), torch.from_numpy(poses),
                                    np.stack([k] * len(poses)), max_depth)
    assert ours == pytest.approx(reference['motion']['tae'], rel=1e-6)


def first_write_wins(targets, values, size):
    out = np.zeros(size)
    hit, first = np.unique(targets, return_index=True)
    out[hit] = values[first]
    return out


def in_front_only(targets, values, size):
    keep = values > 0
    return splat(targets[keep], values[keep], size)


@pytest.mark.parametrize('rule, names', [(first_write_wins, ['motion', 'edges']), (in_front_only, ['edges'])])
def test_the_reference_tells_the_splat_rules_apart(reference, monkeypatch, rule, names):
    """Another collision rule (first write wins; points behind the camera dropped before the splat) moves the figure
    well beyond the parity tolerance: the reference data exercises their last-write-wins splat."""
    monkeypatch.setattr(tae, 'splat', rule)
    for name in names:
        assert temporal_alignment_error(*inputs(reference, name)) != pytest.approx(reference[name]['tae'], rel=1e-4)


def test_the_last_write_wins_on_a_collision():
    assert splat(np.array([3, 1, 3, 0, 3]), np.array([1.0, 2.0, 5.0, 7.0, -4.0]), 5).tolist() == [7, 2, 0, -4, 0]
    # pixels (0, 0) at 4 m and (1, 0) at 1 m of a 1x2 map, the camera 1 m to the right (x' = x - 1) with f = 1:
    # they land at columns round(-1 / 4) = 0 and round((1 - 1) / 1) = 0; the later in row-major order wins
    k = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1]])
    move = np.eye(4)
    move[0, 3] = -1.0
    assert project_depth(np.array([[4.0, 1.0]]), move, k).tolist() == [[1.0, 0.0]]


def rotation_z(degrees: float) -> np.ndarray:
    a = np.radians(degrees)
    out = np.eye(4)
    out[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return out


def test_a_perfect_prediction_under_a_pure_rotation_gives_zero():
    """A quarter turn about the optical axis (square image, principal point at the centre pixel): each pixel lands
    exactly on a pixel, so a perfect prediction of any (asymmetric) static scene gives 0; the inverse rotation
    (poses taken as world-to-camera) does not."""
    n, c = 9, 4
    v, u = np.mgrid[0:n, 0:n]
    depth1 = 1.5 + 0.4 * np.sin(u / 3.0) + 0.1 * v + 0.05 * u * v / n
    # camera 2 = camera 1 turned by +90 degrees about z: a point at offset (dx, dy) appears at (dy, -dx)
    depth2 = depth1[c + (u - c), c - (v - c)]
    depths = np.stack([depth1, depth2])
    k = np.array([[10.0, 0, c], [0, 10.0, c], [0, 0, 1]])
    right = temporal_alignment_error(1 / depths, depths, np.stack([np.eye(4), rotation_z(90)]), k, 10.0)
    wrong = temporal_alignment_error(1 / depths, depths, np.stack([np.eye(4), rotation_z(-90)]), k, 10.0)
    assert right < 1e-5
    assert wrong > 5.0


def test_a_small_rotation_of_a_scene_at_one_range_gives_almost_zero():
    """Every point 2 m from the camera centre: its depth map is the same after any turn of the camera, so only the
    rounding to whole pixels is left; a 10 % scale change between the frames is not."""
    h, w, f = 24, 32, 30.0
    v, u = np.mgrid[0:h, 0:w]
    k = np.array([[f, 0, 15.5], [0, f, 11.5], [0, 0, 1]])
    depth = 2.0 / np.sqrt(1 + ((u - 15.5) / f) ** 2 + ((v - 11.5) / f) ** 2)
    turn = np.eye(4)
    a = np.radians(5.0)
    turn[:3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
    poses = np.stack([np.eye(4), turn, turn @ turn])
    depths = np.stack([depth] * 3)
    assert temporal_alignment_error(1 / depths, depths, poses, k, 10.0) < 0.3
    jittered = depths * np.array([1.0, 1.1, 1.0])[:, None, None]
    assert temporal_alignment_error(1 / jittered, depths, poses, k, 10.0) > 3.0


def test_the_formula_on_two_frames_by_hand():
    """Frame 1 a wall at 2 m, frame 2 the camera slid 0.4 m right (2 pixels at f = 10 px, depth 2 m) predicting
    1.8 + 0.1 u per column (u = 0..7; the ground truth the same, so the alignment is the identity). Forward: columns
    2..7 of frame 1 land on 0..5 with depth 2; backward: columns 0..5 of frame 2 land on 2..7 (a shift of
    4 / depth, 1.6 to 2.2, rounds to 2) with their own depth; columns 6, 7 leave the image."""
    h, w = 3, 8
    u = np.arange(w, dtype=float)
    depths = np.stack([np.full((h, w), 2.0), np.broadcast_to(1.8 + 0.1 * u, (h, w))])
    k = np.array([[10.0, 0, 3.0], [0, 10.0, 1.0], [0, 0, 1]])
    slide = np.eye(4)
    slide[0, 3] = 0.4
    poses = np.stack([np.eye(4), slide])
    seen = 1.8 + 0.1 * u[:6]
    forward = np.mean(np.abs(seen - 2.0) / seen)
    backward = np.mean(np.abs(2.0 - seen) / 2.0)
    assert temporal_alignment_error(1 / depths, depths, poses, k, 10.0) == pytest.approx(
        50 * (forward + backward), rel=1e-6)
    # frame 2 masked out entirely: the forward term is their `return 0`, still counted in the mean over 2 terms
    masks = np.stack([np.ones((h, w), bool), np.zeros((h, w), bool)])
    assert temporal_alignment_error(1 / depths, depths, poses, k, 10.0, masks) == pytest.approx(50 * backward, rel=1e-6)
    # a metric model's depth goes in as kind='depth'
    assert temporal_alignment_error(depths, depths, poses, k, 10.0, kind='depth') == pytest.approx(
        50 * (forward + backward), rel=1e-6)
    assert pair_error(depths[0], depths[1], np.linalg.inv(slide), k) == pytest.approx(forward, rel=1e-12)


def test_alignment_is_one_scale_and_shift_for_the_sequence():
    """A prediction off by one affine map in disparity is aligned back; pixels without ground truth get the map too,
    clipped to max_depth."""
    depth = np.linspace(1.0, 3.0, 24).reshape(2, 3, 4)
    gts = depth.copy()
    gts[0, 0, 0] = 0.0     # a hole
    gts[1, 2, 3] = 50.0    # beyond max_depth: not aligned on
    out = aligned_depth(0.5 / depth + 0.1, gts, max_depth=2.9)
    assert np.allclose(out, np.minimum(depth, 2.9), rtol=1e-6)


@pytest.mark.parametrize('change, message', [
    (dict(gts=np.zeros((2, 3, 4))), 'no ground-truth pixel'),
    (dict(poses=np.stack([np.eye(4)] * 3)), 'poses has shape'),
    (dict(intrinsics=[[10.0, 1.0, 2], [0, 10.0, 1], [0, 0, 1]]), 'skew'),
    (dict(masks=np.ones((2, 3, 5), bool)), 'masks: 2 maps'),
    (dict(kind='inverse'), "kind='inverse'"),
    (dict(predictions=np.ones((1, 3, 4)), gts=np.ones((1, 3, 4)), poses=np.eye(4)[None]), 'needs two'),
])
def test_bad_inputs_are_refused_with_the_reason(change, message):
    args = dict(predictions=np.ones((2, 3, 4)), gts=np.ones((2, 3, 4)), poses=np.stack([np.eye(4)] * 2),
                intrinsics=[[10.0, 0, 2], [0, 10.0, 1], [0, 0, 1]], max_depth=10.0)
    with pytest.raises(ValueError, match=message):
        temporal_alignment_error(**{**args, **change})
