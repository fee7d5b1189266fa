"""Clips of consecutive frames from a dataset of video frames, for models whose batches are whole clips
(:class:`~heads.models.video_depth_anything.VideoDepthEstimator`: '(b t) 3 H W').

:class:`VideoClipDataset` wraps a frame dataset (e.g. :class:`~heads.datasets.RGBDFolderDataset` or 7-Scenes'
:class:`~heads.datasets.RGBDDepthDataset`, whose frames are listed in video order): item ``i`` is the clip of
``frames`` consecutive frames starting at frame ``i * step``, a list of the frame dataset's packed samples
(``{'inputs', 'data_samples'}``). Every frame of a clip goes through the frame dataset's pipeline with the same
random draws (the random generators' state is replayed for each frame: ``np.random``, which this project's transforms
use, Python's ``random`` and torch's), so a clip shares one flip, resize, crop and photometric change, as a video's
augmentation must. :func:`clip_collate` (``collate_fn=dict(type='heads.clip_collate')``) flattens a batch of clips into
the frames of whole clips, clip by clip; each sample's metainfo gets ``clip_frames`` (the clip's length), which the
video model reads.
"""
from __future__ import annotations

import random

import numpy as np
import torch
from mmengine.dataset import pseudo_collate
from torch.utils.data import Dataset

from ..registry import DATASETS, FUNCTIONS


def clip_starts(n: int, frames: int, step: int) -> list[int]:
    """The first frames of the clips of ``frames`` among ``n`` frames, every ``step`` frames; when ``step`` leaves
    the last frames out, one more clip ends at the last frame (so every frame is in some clip)."""
    starts = list(range(0, n - frames + 1, step))
    if starts and starts[-1] + frames < n:
        starts.append(n - frames)
    return starts


@DATASETS.register_module()
class VideoClipDataset(Dataset):
    """Clips of ``frames`` consecutive frames of ``dataset`` (a config dict or a built dataset), one starting every
    ``step`` frames (default: ``frames``, clips side by side; 1: every clip of the video, overlapping), plus a last
    one ending at the last frame when the steps leave frames out (module docstring for the augmentation shared in a
    clip). The frame dataset's order must be the video's: its frames are taken as listed."""

    def __init__(self, dataset, frames: int, step: int | None = None, lazy_init: bool = False):
        if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
            raise ValueError(f"VideoClipDataset: frames must be a positive clip length, got {frames!r}")
        step = frames if step is None else step
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise ValueError(f"VideoClipDataset: step must be a positive number of frames, got {step!r}")
        self.dataset = DATASETS.build(dataset) if isinstance(dataset, dict) else dataset
        self.frames, self.step = frames, step
        self.starts: list[int] | None = None
        if not lazy_init:
            self.full_init()

    @property
    def metainfo(self) -> dict:
        return self.dataset.metainfo

    def full_init(self) -> None:
        """Load the frame dataset's list and cut it into clips; a ValueError if it holds fewer frames than a clip."""
        if self.starts is not None:
            return
        if hasattr(self.dataset, 'full_init'):
            self.dataset.full_init()
        n = len(self.dataset)
        if n < self.frames:
            where = ' '.join(f'{k}={v!r}' for k, v in (('data_root', getattr(self.dataset, 'data_root', None)),
                                                       ('list_file', getattr(self.dataset, 'ann_file', None))) if v)
            raise ValueError(f"VideoClipDataset: the frame dataset ({type(self.dataset).__name__} {where}) has {n} "
                             f"frame(s), fewer than one clip of frames={self.frames}: list at least {self.frames} "
                             f"frames there or set a shorter clip (VideoClipDataset's `frames`)")
        self.starts = clip_starts(n, self.frames, self.step)

    def __len__(self) -> int:
        self.full_init()
        return len(self.starts)

    def clip_indices(self, index: int) -> range:
        """The frame indices of clip ``index``."""
        self.full_init()
        start = self.starts[index]
        return range(start, start + self.frames)

    def __getitem__(self, index: int) -> list[dict]:
        """Clip ``index``: its frames' packed samples, augmented alike, each sample's metainfo with ``clip_frames``
        and ``clip_start`` (its first frame's index in the frame dataset)."""
        states = np.random.get_state(), random.getstate(), torch.get_rng_state()
        clip = []
        for k, i in enumerate(self.clip_indices(index)):
            if k:  # the first frame's draws again
                np.random.set_state(states[0])
                random.setstate(states[1])
                torch.set_rng_state(states[2])
            sample = self.dataset.prepare_data(i)
            if sample is None:
                raise ValueError(f"VideoClipDataset: the pipeline dropped frame {i} of clip {index}; a clip needs "
                                 f"every frame: remove the transform that drops samples")
            clip.append(sample)
        sizes = {tuple(s['inputs'].shape) for s in clip}
        if len(sizes) > 1:
            raise ValueError(f"VideoClipDataset: the frames of clip {index} (frames {self.starts[index]} on) came out "
                             f"of the pipeline at different sizes {sorted(sizes)}: a clip's frames must be stored at "
                             f"one size, or resized to a fixed one")
        for sample in clip:
            sample['data_samples'].set_metainfo(dict(clip_frames=self.frames, clip_start=self.starts[index]))
        return clip


@FUNCTIONS.register_module()
def clip_collate(batch: list[list]) -> dict:
    """mmengine's ``pseudo_collate`` of a batch of clips as one batch of their frames, clip after clip ('(b t)')."""
    return pseudo_collate([frame for clip in batch for frame in clip])
