"""Tiled inference (heads.models.tiling): tile origins, blend weights and blends against hand-worked numbers, relative
tiles aligned back exactly, the single pass of a real model, memory that does not grow with the image, test_cfg
mode='tile' and the Predictor option."""
import math

import cv2
import numpy as np
import pytest
import torch

import heads
from heads.evaluation.metrics import fit_scale_shift
from heads.models.depth_anything import depth_anything_v2_config
from heads.models.tiling import align_to, ramp_profile, tile_starts, tile_weights, tiled_inference
from zoo.profiling import peak_memory

from ..reference import perturb_, sample_street, shared_data, tiny_dpt


def test_tile_origins_spread_evenly_with_at_least_the_overlap():
    assert tile_starts(10, 6, 2) == [0, 4]
    assert tile_starts(6, 6, 2) == [0] and tile_starts(3, 6, 2) == [0]
    # 11 = 6 + 5: n = ceil((11 - 2) / (6 - 2)) = 3 tiles, 0, 2.5 -> 2 (round half to even), 5
    assert tile_starts(11, 6, 2) == [0, 2, 5]
    # 4000 px in 518 tiles, overlap 64: ceil(3936 / 454) = 9 tiles, 3482 / 8 = 435.25 apart
    assert tile_starts(4000, 518, 64) == [0, 435, 870, 1306, 1741, 2176, 2612, 3047, 3482]
    with pytest.raises(ValueError, match=r'overlap must be in \[0, tile size 6\), got 6'):
        tile_starts(10, 6, 6)


def test_ramps_by_hand():
    # size 10, tiles at 0 and 4 of 6: they share pixels 4 and 5, u = 0.25, 0.75
    assert ramp_profile([0, 4], 0, 6, 10).tolist() == [1, 1, 1, 1, 0.75, 0.25]
    assert ramp_profile([0, 4], 1, 6, 10).tolist() == [0.25, 0.75, 1, 1, 1, 1]
    s1, s3 = math.sin(math.pi / 8) ** 2, math.sin(3 * math.pi / 8) ** 2  # 0.1464..., 0.8535...
    assert ramp_profile([0, 4], 0, 6, 10, 'cosine')[4:].tolist() == pytest.approx([s3, s1], abs=1e-15)
    assert ramp_profile([0, 4], 1, 6, 10, 'cosine')[:2].tolist() == pytest.approx([s1, s3], abs=1e-15)
    assert ramp_profile([0], 0, 6, 4).tolist() == [1, 1, 1, 1]  # one tile, cut to the image: no ramp
    with pytest.raises(ValueError, match="ramp must be one of linear, cosine, got 'gauss'"):
        ramp_profile([0, 4], 0, 6, 10, 'gauss')


@pytest.mark.parametrize('ramp', ['linear', 'cosine'])
def test_2d_weights_sum_to_one_and_corner_by_hand(ramp):
    rows, cols, tile, size = tile_starts(10, 6, 2), tile_starts(14, 6, 2), (6, 6), (10, 14)
    assert cols == [0, 4, 8]
    total = torch.zeros(size, dtype=torch.float64)
    for i, top in enumerate(rows):
        for j, left in enumerate(cols):
            total[top:top + 6, left:left + 6] += tile_weights(rows, cols, i, j, tile, size, ramp)
    torch.testing.assert_close(total, torch.ones(size, dtype=torch.float64))
    if ramp == 'linear':  # tile (0, 0) at pixel (5, 4): falling ramp's 0.25 down, 0.75 across
        assert tile_weights(rows, cols, 0, 0, tile, size)[5, 4].item() == 0.25 * 0.75


def per_call(values):
    """A predict callable whose n-th call returns the constant ``values[n]`` at the input's size."""
    calls = iter(values)
    return lambda x: torch.full((x.shape[0], 1, *x.shape[-2:]), float(next(calls)))


def test_blend_of_two_constant_tiles_by_hand():
    # 1 x 10 image, tiles of 1 x 6 at 0 and 4: tile 0 says 0, tile 1 says 8; pixels 4, 5 blend 0.75/0.25, 0.25/0.75
    out = tiled_inference(per_call([0, 8]), torch.zeros(1, 3, 1, 10), (1, 6), (0, 2))
    assert out.shape == (1, 1, 1, 10)
    assert out[0, 0, 0].tolist() == [0, 0, 0, 0, 2, 6, 8, 8, 8, 8]


def test_metric_blend_of_a_constant_is_the_constant_and_a_pointwise_model_is_the_model():
    x = torch.randn(2, 3, 37, 53)
    out = tiled_inference(lambda t: torch.full((t.shape[0], 1, *t.shape[-2:]), 3.5), x, (16, 24), 5)
    torch.testing.assert_close(out, torch.full((2, 1, 37, 53), 3.5))
    conv = torch.nn.Conv2d(3, 2, 1)
    with torch.no_grad():
        torch.testing.assert_close(tiled_inference(conv, x, (16, 24), (4, 7), ramp='cosine'), conv(x))
        small = torch.randn(1, 3, 9, 11)  # below the tile both ways: padded for the forward, cut back
        torch.testing.assert_close(tiled_inference(conv, small, (16, 24), 4), conv(small))


def true_disparity() -> torch.Tensor:
    """1 / depth of a real 7-Scenes frame, invalid pixels filled with the median: '1 1 h w'."""
    depth = cv2.imread(str(shared_data('depth-7scenes', 'depth', 'frame-000000.png')), cv2.IMREAD_UNCHANGED)
    depth = depth.astype(np.float64) / 1000
    valid = (depth > 0) & (depth < 65.535)
    depth[~valid] = np.median(depth[valid])
    return torch.from_numpy(1 / depth)[None, None]


def test_relative_tiles_with_their_own_scale_and_shift_are_stitched_back_exactly():
    """A relative 'model' returning the true disparity times a per-tile scale plus a per-tile shift (the tile's input
    is the disparity itself): after alignment the result is the disparity with the first tile's scale and shift."""
    disparity = true_disparity()                                  # 1 1 480 640
    gen = torch.Generator().manual_seed(0)
    scales, shifts = torch.rand(64, generator=gen) * 4 + 0.5, torch.randn(64, generator=gen)
    calls = iter(range(64))

    def relative(tile):
        n = next(calls)
        return scales[n] * tile + shifts[n]

    out = tiled_inference(relative, disparity, (160, 200), 40, align=True)
    torch.testing.assert_close(out, scales[0] * disparity + shifts[0], rtol=1e-9, atol=1e-9)
    assert next(calls) == len(tile_starts(480, 160, 40)) * len(tile_starts(640, 200, 40))  # 4 x 4 tiles, each once
    calls = iter(range(64))
    plain = tiled_inference(relative, disparity, (160, 200), 40)  # without alignment the tiles disagree
    assert (plain - scales[0] * disparity - shifts[0]).abs().max() > 0.5


def test_alignment_by_hand():
    blended = torch.tensor([[[[1.0, 2.0, 3.0, 9.0]]]])
    shared = torch.tensor([[True, True, True, False]])
    # out = 2 * blended + 1 on the shared pixels: s = 0.5, t = -0.5 maps it back; the unshared pixel follows (7 -> 3)
    torch.testing.assert_close(align_to(torch.tensor([[[[3.0, 5.0, 7.0, 7.0]]]]), blended, shared),
                               torch.tensor([[[[1.0, 2.0, 3.0, 3.0]]]]))
    # a flat tile (s = 0) or an upside-down one (s < 0) keeps its scale and takes the mean difference as shift
    torch.testing.assert_close(align_to(torch.full((1, 1, 1, 4), 5.0), blended, shared), torch.full((1, 1, 1, 4), 2.0))
    torch.testing.assert_close(align_to(torch.tensor([[[[3.0, 2.0, 1.0, 0.0]]]]), blended, shared),
                               torch.tensor([[[[3.0, 2.0, 1.0, 0.0]]]]))
    assert align_to(torch.ones(1, 1, 1, 4), blended, torch.zeros(1, 4, dtype=torch.bool)).eq(1).all()


def gap(tiled: torch.Tensor, single: torch.Tensor, relative: bool) -> float:
    """RMS of tiled - single over the standard deviation of single (tiled first mapped onto single by one global
    least-squares scale and shift when relative: a relative map is defined up to those)."""
    t, s = tiled.double().flatten(), single.double().flatten()
    if relative:
        a, b = fit_scale_shift(t, s)
        t = a * t + b
    return float((t - s).pow(2).mean().sqrt() / s.std())


#: the measured gap (below) of Depth Anything V2 ViT-S, random initialisation (seed 0), a 7-Scenes frame at 280x378,
#: 280x280 tiles overlapping by 56 px (two tiles): 0.22 relative, 0.21 metric. A ViT attends across the whole image,
#: so a tile that sees less of it predicts differently: tiling is not exact for these models, and this bound (about
#: 1.4x the measured gap) is what the tests hold the tiled pass to. The gap of trained weights is not measured here.
SINGLE_PASS_TOLERANCE = 0.3


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['relative', 'metric'])
def test_tiled_depth_anything_is_within_the_stated_tolerance_of_the_single_pass(mode):
    torch.manual_seed(0)
    model = heads.MODELS.build(depth_anything_v2_config('vits', mode)).eval()
    image = cv2.resize(cv2.imread(str(shared_data('depth-7scenes', 'rgb', 'frame-000000.jpg')))[:, :, ::-1],
                       (378, 280))
    x = model.data_preprocessor({'inputs': [torch.from_numpy(image.transpose(2, 0, 1).copy())]}, False)['inputs']
    with torch.no_grad():
        single = model.predict_tensor(x)
        tiled = tiled_inference(model.predict_tensor, x, (280, 280), 56, align=mode == 'relative')
    assert single.std() > 1e-3 * single.abs().mean()  # a map with structure, not a constant
    measured = gap(tiled, single, mode == 'relative')
    assert measured < SINGLE_PASS_TOLERANCE, measured
    assert gap(single.flip(-1), single, True) > 3 * SINGLE_PASS_TOLERANCE  # the measure tells a wrong map apart


def tile_and_total_peaks(model, height: int, width: int) -> tuple[float, float]:
    """Peak tensor MiB of the largest single model call, and of the whole tiled pass, for an image of this size."""
    peaks = []

    def measured(t):
        with peak_memory('cpu') as mem:
            out = model.predict_tensor(t)
        peaks.append(mem['peak_mib'])
        return out

    x = torch.randn(1, 3, height, width)
    with peak_memory('cpu') as total:  # autograd on, as a caller may leave it: tiled_inference turns it off
        tiled_inference(measured, x, (64, 64), 16)
    return max(peaks), total['peak_mib']


def test_model_memory_is_one_tile_whatever_the_image_size():
    model = heads.MODELS.build(tiny_dpt('metric')).eval()
    tile_small, total_small = tile_and_total_peaks(model, 64, 96)      # 1 x 2 tiles
    tile_large, total_large = tile_and_total_peaks(model, 128, 192)    # 3 x 4 tiles
    assert tile_large == tile_small
    # the peak falls in a tile's forward; what grows is the two image-sized sums, 'b k H W' and '1 1 H W' (k = 1):
    # 2 float32 per pixel (the result, made after the last tile, stays below that peak)
    grown = 2 * 4 * (128 * 192 - 64 * 96) / 2 ** 20
    assert total_large - total_small == pytest.approx(grown, abs=0.01)


def test_tile_mode_of_the_task_models():
    whole = heads.MODELS.build(tiny_dpt('relative')).eval()
    tiled = heads.MODELS.build(tiny_dpt('relative', test_cfg=dict(mode='tile', crop_size=(64, 96), overlap=32)))
    tiled.load_state_dict(whole.state_dict())
    tiled.eval()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        torch.testing.assert_close(tiled.inference(x), whole.inference(x))  # one tile covers the image
        assert tiled.inference(torch.randn(1, 3, 96, 160)).shape == (1, 1, 96, 160)
    seg = heads.MODELS.build(tiny_dpt('seg', test_cfg=dict(mode='tile', crop_size=(64, 64), overlap=16))).eval()
    with torch.no_grad():
        assert seg.inference(torch.randn(1, 3, 96, 128)).shape == (1, 11, 96, 128)  # logits, plain blend
    with pytest.raises(ValueError, match=r"test_cfg mode='tile' needs overlap, e.g. test_cfg=dict\(mode='tile', "):
        heads.MODELS.build(tiny_dpt('metric', test_cfg=dict(mode='tile', crop_size=(64, 64))))
    with pytest.raises(ValueError, match=r"multiples of this model's input multiple 32, got \(64, 70\)"):
        heads.MODELS.build(tiny_dpt('metric', test_cfg=dict(mode='tile', crop_size=(64, 70), overlap=16)))


def test_predictor_tiles_a_real_image_at_its_own_size():
    image = cv2.resize(cv2.imread(str(sample_street())), (640, 480))[:, :, ::-1].copy()
    cfg = dict(model=tiny_dpt('relative'), predict_scale=(160, 120))
    torch.manual_seed(0)
    predictor = heads.Predictor(cfg, tile=(256, 256), overlap=64)
    perturb_(predictor.model, 0.05)  # at its init the tiny model predicts 0 everywhere: no value to check
    depth = predictor(image)
    assert depth.shape == (480, 640) and depth.dtype == np.float32  # predict_scale is not applied when tiling
    # the values: tiles at rows 0, 112, 224 and columns 0, 192, 384 (tile_starts); where one tile alone covers the image
    # the prediction is that tile's own prediction (the first tile: as it is; the others: mapped by a scale and
    # shift onto the blend, relative depth), computed here from the image normalised by hand and the model untiled
    assert tile_starts(480, 256, 64) == [0, 112, 224] and tile_starts(640, 256, 64) == [0, 192, 384]
    whole = heads.MODELS.build(tiny_dpt('relative')).eval()
    whole.load_state_dict(predictor.model.state_dict())
    mean, std = torch.tensor([123.675, 116.28, 103.53]), torch.tensor([58.395, 57.12, 57.375])
    x = ((torch.from_numpy(image).permute(2, 0, 1).float() - mean[:, None, None]) / std[:, None, None])[None]
    with torch.no_grad():
        first = whole.predict_tensor(x[..., :256, :256])[0, 0].numpy()
        last = whole.predict_tensor(x[..., 224:, 384:])[0, 0].numpy()
    np.testing.assert_allclose(depth[:112, :192], first[:112, :192], rtol=1e-4, atol=1e-5 * np.abs(first).max())
    alone = last[144:, 64:]  # rows 368-480, columns 448-640: the last tile's alone
    scale, shift = np.polyfit(alone.ravel(), depth[368:, 448:].ravel(), 1)
    assert scale > 0 and np.abs(scale * alone + shift - depth[368:, 448:]).max() < 1e-3 * depth[368:, 448:].std()
    assert depth.std() > 5e-3 * np.abs(depth).max() and alone.std() > 0.1 * np.abs(alone).max()  # not constants
