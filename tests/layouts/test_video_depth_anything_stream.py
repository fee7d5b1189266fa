"""Video Depth Anything one frame at a time (heads.models.video_stream): this project's stream gives the depth of the
authors' streaming model (``video_depth_stream``'s ``infer_video_depth_one``, fp32) frame by frame.
tests/reference_data/vda_stream_authors.pt holds their depth of 46 random frames (made by
tests/reference_data/vda_stream_authors.py at their commit 4f5ae23, the small seeded model of vda_authors.pt): past
one window, so the window slides (frame 31 on) and its long-range slot holds real frames (frame 42 on).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from heads.models.task_checkpoint import load_task_checkpoint
from heads.models.video_stream import VideoDepthStream
from zoo.registry import IMAGENET_MEAN, IMAGENET_STD

from .test_video_depth_anything import small

DATA = Path(__file__).resolve().parents[1] / 'reference_data'


@pytest.fixture(scope='module')
def reference():
    ref = torch.load(DATA / 'vda_stream_authors.pt', weights_only=True)
    frames = ref['frames'].permute(0, 3, 1, 2).float() / 255  # 'n h w 3' uint8 -> 'n 3 h w', normalised as theirs
    ref['x'] = (frames - torch.tensor(IMAGENET_MEAN)[:, None, None]) / torch.tensor(IMAGENET_STD)[:, None, None]
    ref['state'] = torch.load(DATA / 'vda_authors.pt', weights_only=True)['state']
    return ref


def loaded(reference, metric: bool = False):
    model = small(metric)
    load_task_checkpoint(model, reference['state'])
    return model


def assert_their_depth(got: torch.Tensor, want: torch.Tensor) -> None:
    """Frame by frame within 1e-4 of the frame's largest depth (float64 runs of both agree to 1e-7: the rest is
    float32 rounding, carried from frame to frame through the cached states)."""
    assert got.shape == want.shape
    error = (got - want).abs().flatten(1).amax(1) / want.abs().flatten(1).amax(1)
    assert error.max() <= 1e-4, f"frames {torch.nonzero(error > 1e-4).flatten().tolist()} differ: {error.max():.2e}"


def test_the_stream_gives_their_streaming_depth(reference):
    model = loaded(reference)
    stream = model.stream()
    got = torch.stack([stream(frame) for frame in reference['x']])
    assert stream.seen == 46 and len(stream.recent) == stream.kept == 41
    assert_their_depth(got, reference['depth'])


def test_the_metric_stream_is_the_same_network_in_metres(reference):
    stream = loaded(reference, metric=True).stream()
    assert_their_depth(torch.stack([stream(frame) for frame in reference['x'][:3]]), reference['depth'][:3])


def test_the_first_frame_is_a_clip_of_one_frame(reference):
    """Their stream runs its first frame alone; the window's context starts from the frames after it."""
    model = loaded(reference)
    x = reference['x']
    assert torch.equal(model.stream()(x[0]), model.predict_clips(x[None, :1])[0, 0])


def test_streams_in_step_and_reset(reference):
    """A batch of streams is each stream alone; reset() starts a new video; a frame of another size is refused."""
    model = loaded(reference)
    x, want = reference['x'], reference['depth']
    other = torch.flip(x[:3], dims=[-1])
    stream = VideoDepthStream(model)
    both = torch.stack([stream(torch.stack([a, b])) for a, b in zip(x[:3], other)], dim=1)  # 2 t h w
    assert_their_depth(both[0], want[:3])
    stream = model.stream()
    alone = torch.stack([stream(frame) for frame in other])
    assert torch.allclose(both[1], alone, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match='share one size'):
        stream(x[0, :, :14])
    stream.reset()
    assert stream.seen == 0 and torch.equal(stream(other[0]), alone[0])


def test_a_window_longer_than_the_model_takes_is_refused(reference):
    stream = loaded(reference).stream(length=33)
    x = reference['x']
    stream(x[0])
    with pytest.raises(ValueError, match=r'33 frames \(32 cached\).*max_frames'):
        stream(x[1])
    with pytest.raises(ValueError, match='3 < length <= kept \\+ 1'):
        VideoDepthStream(None, length=32, kept=20)
