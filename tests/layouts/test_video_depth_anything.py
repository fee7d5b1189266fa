"""Video Depth Anything (heads.models.video_depth_anything): the authors' checkpoints (``pretrained.*``, ``head.*``)
load into this project's VideoDepthEstimator with their code's depth. tests/reference_data/vda_authors.pt holds a
small seeded model of their ``VideoDepthAnything`` as they save it and its outputs on clips at a square and a
non-square size (made by tests/reference_data/vda_authors.py at their commit 4f5ae23), and the keys and shapes of the
released sizes, against which ours are built on the meta device.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from heads.layouts.video_depth_anything import video_depth_anything_from_official
from heads.models.task_checkpoint import load_task_checkpoint, task_checkpoint_layout
from heads.models.video_depth_anything import video_depth_anything_config
from heads.models.video_windows import VideoWindows
from heads.registry import MODELS
from zoo.core import sincos_1d
from zoo.registry import IMAGENET_MEAN, IMAGENET_STD
from zoo.weights import CheckpointLayoutError

REFERENCE = Path(__file__).resolve().parents[1] / 'reference_data' / 'vda_authors.pt'


@pytest.fixture(scope='module')
def reference():
    return torch.load(REFERENCE, weights_only=True)


def small_cfg(metric: bool = False) -> dict:
    """Ours at the reference's sizes: DINOv2 width 32, 2 heads, MLP ratio 2; neck widths 32."""
    cfg = video_depth_anything_config('vits', metric=metric, embed_dim=32, num_heads=2, mlp_ratio=2.0)
    cfg['neck'].update(hidden_channels=(32, 32, 32, 32), fusion_channels=32)
    cfg['decode_head'].update(in_channels=32)
    return cfg


def small(metric: bool = False):
    return MODELS.build(small_cfg(metric)).eval()


def assert_their_depth(model, reference) -> None:
    for size, clips in reference['inputs'].items():
        want = reference['outputs'][size]
        got = model.predict_clips(clips)
        assert got.shape == want.shape
        assert (got - want).abs().max() <= 1e-4 * want.abs().max(), size


def test_the_authors_checkpoint_gives_their_depth(reference, tmp_path):
    path = tmp_path / 'video_depth_anything_vits.pth'
    torch.save(reference['state'], path)
    model = small()
    assert task_checkpoint_layout(reference['state'], model) == 'Video Depth Anything'
    report = load_task_checkpoint(model, path)
    assert report.format == 'Video Depth Anything' and not report.missing and not report.unexpected
    assert_their_depth(model, reference)
    for module in model.neck.temporal:  # the comparison sees the temporal attention: its output is not zero
        assert module.proj_out.weight.abs().sum() > 0


def test_the_metric_model_is_the_same_network_in_metres(reference):
    """The metric checkpoints are the same network (a ReLU head, metres): the same numbers."""
    model = small(metric=True)
    assert model.decode_head.mode == 'metric' and model.decode_head.output == 'relu'
    load_task_checkpoint(model, reference['state'])
    assert_their_depth(model, reference)


def test_without_temporal_attention_the_depth_differs(reference):
    """Shows the reference depends on the temporal modules: zeroing them moves the depth."""
    model = small()
    load_task_checkpoint(model, reference['state'])
    with torch.no_grad():
        for module in model.neck.temporal:
            module.proj_out.weight.zero_()
            module.proj_out.bias.zero_()
    clips, want = reference['inputs']['70x70'], reference['outputs']['70x70']
    assert (model.predict_clips(clips) - want).abs().max() > 1e-2 * want.abs().max()


def test_a_long_video_in_overlapping_windows_gives_their_aligned_depth(reference):
    """Their ``infer_video_depth`` on 50 frames: three 32-frame windows, key frames, scale-shift alignment and the
    blend of the overlap; ours on the same frames, normalised as theirs."""
    model = small()
    load_task_checkpoint(model, reference['state'])
    frames, want = reference['video']['frames'], reference['video']['depth']  # 'n h w 3' uint8, 'n h w'
    x = (frames.permute(0, 3, 1, 2).float() / 255 - torch.tensor(IMAGENET_MEAN)[:, None, None]) / \
        torch.tensor(IMAGENET_STD)[:, None, None]
    got = model.predict_video(x)
    assert got.shape == want.shape == (50, 42, 56)
    assert (got - want).abs().max() <= 1e-4 * want.abs().max()
    windowed = model.predict_clips(x[None, :32])[0]  # the first window as it is; the rest moved by the alignment
    assert torch.allclose(got[:24], windowed[:24], rtol=1e-5, atol=1e-6)


def test_the_predictor_runs_a_video_of_frames_as_their_long_video_inference(reference, tmp_path):
    """heads.Predictor.video: the 50 frames as uint8 images, normalised by the config's preprocessor, in windows
    (their infer_video_depth); a single image is a one-frame clip; frames of two sizes are refused, naming the
    frame."""
    from heads import Predictor
    path = tmp_path / 'vda.pth'
    torch.save(reference['state'], path)
    predictor = Predictor({'model': small_cfg()}, path)
    frames, want = reference['video']['frames'].numpy(), reference['video']['depth']
    got = predictor.video(list(frames))
    assert len(got) == 50 and got[0].shape == (42, 56)
    assert abs(torch.from_numpy(np.stack(got)) - want).max() <= 1e-4 * want.abs().max()
    alone = predictor(frames[0])  # one image: a one-frame clip
    one = torch.from_numpy(frames[:1]).permute(0, 3, 1, 2).float()
    x = (one / 255 - torch.tensor(IMAGENET_MEAN)[:, None, None]) / torch.tensor(IMAGENET_STD)[:, None, None]
    want_alone = predictor.model.predict_clips(x[None])[0, 0]
    assert abs(torch.from_numpy(alone) - want_alone).max() <= 1e-4 * want_alone.abs().max()
    with pytest.raises(ValueError, match='frame 1 is 28x56, but the video'):
        predictor.video([frames[0], frames[1, :28]])


def test_window_settings_are_checked():
    with pytest.raises(ValueError, match='key frames'):
        VideoWindows(length=16, overlap=10)  # key frames 24 .. 31 are not frames of a 16-frame window


def meta_state(shapes: dict, frames: int = 32) -> dict:
    """The authors' keys with meta tensors of their shapes (the frame tables real: they are checked by value)."""
    return {k: sincos_1d(frames, shape[-1])[None] if k.endswith('pos_encoder.pe') else
            torch.empty(shape, device='meta') for k, shape in shapes.items()}


@pytest.mark.parametrize('encoder', ['vits', 'vitb', 'vitl'])
def test_every_released_size_converts_key_by_key_and_shape_by_shape(reference, encoder):
    with torch.device('meta'):
        model = MODELS.build(video_depth_anything_config(encoder))
    theirs = reference['full_sizes'][encoder]
    converted = video_depth_anything_from_official(meta_state(theirs), model)
    ours = model.state_dict()
    assert sorted(converted) == sorted(ours)
    assert all(tuple(converted[k].shape) == tuple(ours[k].shape) for k in ours)
    # their parameters: ours, their DINOv2's unused mask_token and the frame tables (buffers)
    dim = model.backbone.embed_dim
    assert sum(p.numel() for p in model.parameters()) + dim == sum(
        torch.Size(s).numel() for k, s in theirs.items() if not k.endswith('pos_encoder.pe'))


def test_a_frame_table_of_another_length_is_refused(reference):
    state = dict(reference['state'])
    key = next(k for k in state if k.endswith('pos_encoder.pe'))
    state[key] = sincos_1d(16, state[key].shape[-1])[None]
    with pytest.raises(CheckpointLayoutError, match=r"pos_encoder\.pe.*max_frames"):
        load_task_checkpoint(small(), state, name='vda.pth')


def test_a_batch_that_is_not_whole_clips_is_refused():
    model = small()
    with pytest.raises(ValueError, match='not whole clips of 32 frames'):
        model(torch.randn(3, 3, 42, 42), mode='tensor')
