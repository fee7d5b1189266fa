"""Training on clips (heads.datasets.clips, VideoDepthEstimator's loss path): clips of consecutive frames of an RGB-D
folder, augmented alike within a clip, batched as whole clips '(b t)'; the video model's clip loss on them."""
from __future__ import annotations

import cv2
import mmengine.registry
import numpy as np
import pytest
import torch
from einops import rearrange
from mmengine.structures import BaseDataElement, PixelData

from heads.datasets import RGBDFolderDataset, VideoClipDataset, clip_collate
from heads.datasets.clips import clip_starts
from heads.engine.launch import innermost_dataset
from heads.losses import VideoDepthLoss
from heads.models.video_depth_anything import VideoDepthEstimator, video_depth_anything_config

AUGMENT = [dict(type='LoadImage'), dict(type='LoadAnnotations', seg=False, depth=True),
           dict(type='RandomResize', scale=(16, 12), ratio_range=(0.5, 2.0)), dict(type='RandomFlip', prob=0.5),
           dict(type='RandomCrop', crop_size=(6, 8)), dict(type='PhotoMetricDistortion'),
           dict(type='PackDenseInputs')]


@pytest.fixture(scope='module')
def video(tmp_path_factory):
    """An RGB-D folder of 7 identical frames (12x16, every pixel different), listed in a train.txt."""
    root = tmp_path_factory.mktemp('video')
    (root / 'rgb').mkdir()
    (root / 'depth').mkdir()
    rng = np.random.default_rng(0)
    image, depth = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), rng.integers(500, 4000, (12, 16), np.uint16)
    stems = [f'frame-{i:06d}' for i in range(7)]
    for stem in stems:
        cv2.imwrite(str(root / 'rgb' / f'{stem}.png'), image)
        cv2.imwrite(str(root / 'depth' / f'{stem}.png'), depth)
    (root / 'train.txt').write_text('\n'.join(stems) + '\n')
    return root


def clips_of(root, frames, pipeline=AUGMENT, **kwargs):
    return VideoClipDataset(dict(type='RGBDFolderDataset', data_root=str(root), list_file='train.txt',
                                 pipeline=pipeline), frames=frames, **kwargs)


def test_clip_starts():
    assert clip_starts(10, 4, 4) == [0, 4, 6]  # a last clip ends at the last frame
    assert clip_starts(8, 4, 4) == [0, 4]
    assert clip_starts(5, 4, 1) == [0, 1]
    assert clip_starts(4, 4, 3) == [0]


def test_a_clip_is_consecutive_frames_augmented_alike(video):
    clips = clips_of(video, 3, step=1)
    assert len(clips) == 5 and list(clips.clip_indices(2)) == [2, 3, 4]
    np.random.seed(0)
    outcomes = set()
    for index in range(len(clips)):
        for _ in range(4):
            clip = clips[index]
            paths = [s['data_samples'].img_path for s in clip]
            assert [p.rsplit('-', 1)[1] for p in paths] == [f'{i:06d}.png' for i in clips.clip_indices(index)]
            first = clip[0]
            for sample in clip:  # the same frame content, the same draws: the same result
                assert torch.equal(sample['inputs'], first['inputs'])
                assert torch.equal(sample['data_samples'].gt_depth.data, first['data_samples'].gt_depth.data)
                assert sample['data_samples'].clip_frames == 3
                assert sample['data_samples'].clip_start == clips.starts[index]
            outcomes.add(first['inputs'].numpy().tobytes())
    assert len(outcomes) > 10  # the augmentation is random from clip to clip
    frames = RGBDFolderDataset(str(video), list_file='train.txt', pipeline=AUGMENT)
    np.random.seed(0)
    alone = {frames[i]['inputs'].numpy().tobytes() for i in range(3)}
    assert len(alone) > 1  # frame by frame they would differ


def test_a_split_shorter_than_a_clip_says_so(video):
    with pytest.raises(ValueError, match=r"train\.txt.*has 7 frame\(s\), fewer than one clip of frames=8"):
        clips_of(video, 8)
    with pytest.raises(ValueError, match='positive clip length'):
        clips_of(video, 0)


def test_clip_collate_gives_whole_clips_clip_after_clip(video):
    clips = clips_of(video, 2, pipeline=AUGMENT[:2] + AUGMENT[-1:])  # 4 clips: 0-1, 2-3, 4-5, 5-6
    assert clips.starts == [0, 2, 4, 5]
    batch = clip_collate([clips[1], clips[3]])
    assert [s.img_path[-10:-4] for s in batch['data_samples']] == ['000002', '000003', '000005', '000006']
    assert len(batch['inputs']) == 4 and batch['inputs'][0].shape == (3, 12, 16)
    assert mmengine.registry.FUNCTIONS.get('heads.clip_collate') is clip_collate  # as collate_fn names it
    assert clips.metainfo == clips.dataset.metainfo


def test_data_root_reaches_the_wrapped_dataset():
    loader = dict(dataset=dict(type='VideoClipDataset', frames=4, dataset=dict(type='RGBDDepthDataset',
                                                                               data_root='x')))
    assert innermost_dataset(loader) is loader['dataset']['dataset']
    assert innermost_dataset(dict(dataset=dict(type='A', data_root='y')))['data_root'] == 'y'
    assert innermost_dataset({}) == {}


@pytest.fixture(scope='module')
def model():
    cfg = video_depth_anything_config('vits', frames=8, embed_dim=32, num_heads=2, mlp_ratio=2.0)
    cfg['neck'].update(hidden_channels=(32, 32, 32, 32), fusion_channels=32)
    cfg['decode_head'].update(in_channels=32, hidden_channels=8)
    torch.manual_seed(0)
    from heads.registry import MODELS
    return MODELS.build(cfg)


def samples(n, clip_frames=None, size=(28, 42)):
    g = torch.Generator().manual_seed(n)
    out = [BaseDataElement(gt_depth=PixelData(data=torch.rand(1, *size, generator=g) * 3 + 0.5)) for _ in range(n)]
    for s in out:
        s.gt_depth.data[:, :3] = 0  # no measurement
        if clip_frames:
            s.set_metainfo(dict(clip_frames=clip_frames))
    return out


def test_the_video_model_trains_with_the_authors_loss_on_the_batchs_clips(model):
    assert isinstance(model, VideoDepthEstimator) and isinstance(model.loss_fn, VideoDepthLoss)
    x, data = torch.randn(6, 3, 28, 42), samples(6, clip_frames=3)  # two clips of 3 (the model's frames: 8)
    losses = model(x, data, mode='loss')
    assert set(losses) == {'loss_spatial', 'loss_temporal'} and model.frames == 8
    with model.clip_length(3):
        pred, target, valid = model.loss_inputs(x, data)
    clips = [rearrange(v, '(b t) 1 h w -> b t h w', t=3) for v in (pred, target, valid)]
    want = VideoDepthLoss().terms(*clips)
    for name in ('spatial', 'temporal'):
        torch.testing.assert_close(losses[f'loss_{name}'], want[name])
    sum(losses.values()).backward()
    assert model.neck.temporal[0].proj_out.weight.grad.abs().sum() > 0  # the temporal attention learns


def test_clip_lengths_come_from_the_samples_and_must_agree(model):
    x = torch.randn(4, 3, 28, 42)
    with torch.no_grad():
        out = model.predict(x, samples(4, clip_frames=2))
    assert len(out) == 4 and out[0].pred_depth.data.shape == (1, 28, 42) and model.frames == 8
    mixed = samples(2, clip_frames=2) + samples(2, clip_frames=1)
    with pytest.raises(ValueError, match=r'clips of \[1, 2\] frames'):
        model(x, mixed, mode='loss')
    with pytest.raises(ValueError, match='not whole clips of 8 frames'):  # no clip_frames: the model's frames
        model(x, samples(4), mode='loss')


def test_a_per_frame_loss_still_gets_frames():
    cfg = video_depth_anything_config('vits', frames=2, embed_dim=32, num_heads=2, mlp_ratio=2.0)
    cfg['neck'].update(hidden_channels=(32, 32, 32, 32), fusion_channels=32)
    cfg['decode_head'].update(in_channels=32, hidden_channels=8)
    cfg['loss'] = dict(type='ScaleShiftInvariantLoss')
    from heads.registry import MODELS
    model = MODELS.build(cfg)
    assert set(model(torch.randn(4, 3, 28, 28), samples(4, size=(28, 28)), mode='loss')) == {'loss_depth'}
