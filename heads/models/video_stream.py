"""Video Depth Anything one frame at a time (the authors' streaming model, ``video_depth_stream``'s
``infer_video_depth_one``): each frame's depth is predicted as it arrives, its temporal attentions attending a window
of earlier frames through their cached states rather than a clip of frames run together.

A frame's states are what its temporal attentions would give a later frame as keys and values: per attention of the
neck's temporal modules (:class:`heads.necks.temporal.TemporalCache`), its input '(b h w) 1 c' at that module's
level. :class:`VideoDepthStream` keeps the states of the first frame and of the last ``kept`` frames (41) and runs
each new frame with a window of ``length`` (32) positions: the first frame, the oldest kept frame, the last
``length - 3`` frames (29), then the new frame, which alone asks (positions 0 .. 31 in that order). The stream starts
as if the first frame had been seen ``length`` times: until there are enough frames its copies fill the window, and
the oldest kept frame is a copy of the first until frame ``kept + 1`` (frame 42 sees frame 1 in that place, 43 frame
2, ...). The first frame runs alone (a clip of one frame). As theirs, the depth is that of the model's head (a
ReLU'd output, relative or metric) at the frame's size; no alignment between frames.

Memory: the states of ``kept + 1`` frames (first and kept, 42 for the released settings), whatever the video's
length, and the window's copy of ``length - 1`` of them during a step.
"""
from __future__ import annotations

from collections import deque

import torch

from ..necks.temporal import TemporalCache


class VideoDepthStream:
    """``stream(frame)``: depth 'H W' of the next normalised frame '3 H W' (or 'b H W' of 'b 3 H W': ``b`` streams in
    step) of a :class:`.video_depth_anything.VideoDepthEstimator` ``model`` (module docstring); ``reset()`` starts a
    new video. ``length``: the window's frames, at most the model's ``max_frames`` (the released models: 32);
    ``kept``: the recent frames whose states are kept (theirs: 41, the frame gap of their long-video windows)."""

    def __init__(self, model, length: int = 32, kept: int = 41):
        if not 3 < length <= kept + 1:
            raise ValueError(f"a stream window of {length} frames over {kept} kept ones: the window holds the first, "
                             f"the oldest kept, the last (length - 3) and the new frame, so 3 < length <= kept + 1")
        self.model, self.length, self.kept = model, length, kept
        self.reset()

    def reset(self) -> None:
        """Forget the frames seen: the next frame is a video's first."""
        self.first: list[torch.Tensor] | None = None  # the first frame's states, one per temporal attention
        self.recent: deque[list[torch.Tensor]] = deque(maxlen=self.kept)  # the last ``kept`` frames' states
        self.shape: tuple[int, ...] | None = None
        self.seen = 0  # frames since the start

    @torch.no_grad()
    def __call__(self, frame: torch.Tensor) -> torch.Tensor:
        single = frame.ndim == 3
        frames = frame[None] if single else frame
        if frames.ndim != 4 or frames.shape[1] != 3:
            raise ValueError(f"a stream takes one normalised frame '3 H W' (or 'b 3 H W'), got {tuple(frame.shape)}")
        if self.first is None:
            cache = TemporalCache()
            depth = self.model.predict_next(frames, cache)
            self.first, self.shape = cache.states, tuple(frames.shape)
            self.recent.extend([cache.states] * (self.length - 1))
        else:
            if tuple(frames.shape) != self.shape:
                raise ValueError(f"a frame of shape {tuple(frames.shape)} in a stream of {self.shape}: a stream's "
                                 f"frames share one size; call reset() to start another video")
            window = [self.first, self.recent[0], *list(self.recent)[len(self.recent) - (self.length - 3):]]
            cache = TemporalCache([torch.cat(frame_states, dim=1) for frame_states in zip(*window)])
            depth = self.model.predict_next(frames, cache)
            self.recent.append(cache.states)
        self.seen += 1
        return depth[0] if single else depth
