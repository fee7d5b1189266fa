"""Video Depth Anything (Chen et al., CVPR 2025; DepthAnything/Video-Depth-Anything): Depth Anything V2 with temporal
attention in its DPT neck (:class:`heads.necks.VideoDepthAnythingNeck`), depth consistent over a clip's frames.

:class:`VideoDepthEstimator` is a :class:`DepthEstimator` whose batches are whole clips: '(b t) 3 H W' with each clip's
``frames`` frames consecutive (the released models: clips of 32 frames; any length up to 32 runs,
:meth:`VideoDepthEstimator.predict_clips` takes 'b t 3 H W'; :meth:`VideoDepthEstimator.predict_video` a video of any
length, in overlapping windows aligned as the authors' ``infer_video_depth``; :meth:`VideoDepthEstimator.stream` one
frame at a time, as their streaming model ``video_depth_stream``: :mod:`.video_stream`). Predictions and metrics are per
frame, as a DepthEstimator's. Training: a relative model's loss is by default the authors'
:class:`~heads.losses.VideoDepthLoss` (a spatial term per frame, a temporal one over each clip; a loss with
``clip_loss`` gets the clips 'b t h w', each of its ``terms`` logged as ``loss_<term>``), a metric model's SiLog per
frame. Batches of clips come from :class:`~heads.datasets.VideoClipDataset` with its ``clip_collate``; the samples'
``clip_frames`` (set by it) is the clip length of the batch, else ``frames``.

``video_depth_anything_config(encoder, metric)`` is the model config of the released sizes: 'vits', 'vitb', 'vitl',
relative (inverse depth) or metric (metres; the head ends in a ReLU, as theirs); the authors' checkpoints
(``pretrained.*``, ``head.*`` keys) load through the ``'Video Depth Anything'`` row of
:data:`heads.layouts.table.LAYOUTS` (:mod:`heads.layouts.video_depth_anything`).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from functools import partial

import torch
from einops import rearrange

from ..necks.temporal import TemporalCache
from ..registry import MODELS
from .dense_model import build
from .depth_anything import DEPTH_ANYTHING_V2, depth_anything_v2_config
from .depth_estimator import DepthEstimator
from .inference import flip_average
from .segmentor import resize_to
from .video_stream import VideoDepthStream
from .video_windows import VideoWindows, video_depth

#: the released encoders (DepthAnything/Video-Depth-Anything run.py's model_configs: Depth Anything V2's sizes)
ENCODERS = ('vits', 'vitb', 'vitl')


@MODELS.register_module()
class VideoDepthEstimator(DepthEstimator):
    """:class:`DepthEstimator` over clips of ``frames`` frames (module docstring); its neck takes ``frames``."""

    def __init__(self, *args, frames: int = 32, loss=None, **kwargs):
        super().__init__(*args, loss=loss, **kwargs)
        if not isinstance(frames, int) or frames < 1:
            raise ValueError(f"frames must be a positive clip length, got {frames!r}")
        self.frames = frames
        if loss is None and self.relative:
            self.loss_fn = build(dict(type='VideoDepthLoss'))

    @contextmanager
    def clip_length(self, frames: int):
        """Run with clips of ``frames`` frames (``self.frames`` restored after)."""
        kept, self.frames = self.frames, frames
        try:
            yield
        finally:
            self.frames = kept

    def batch_clip_length(self, data_samples) -> int:
        """The clip length the samples carry (``clip_frames`` in their metainfo, :class:`VideoClipDataset`'s), else
        ``frames``; a ValueError if they disagree."""
        lengths = {s.metainfo.get('clip_frames') for s in data_samples or ()} - {None}
        if len(lengths) > 1:
            raise ValueError(f"a batch holds clips of {sorted(lengths)} frames: give clips of one length per batch")
        return lengths.pop() if lengths else self.frames

    def loss(self, inputs, data_samples) -> dict:
        t = self.batch_clip_length(data_samples)
        with self.clip_length(t):
            pred, target, valid = self.loss_inputs(inputs, data_samples)  # (b t) 1 h w
        if not getattr(self.loss_fn, 'clip_loss', False):
            return {'loss_depth': self.loss_fn(pred, target, valid)}
        clips = [rearrange(x, '(b t) 1 h w -> b t h w', t=t) for x in (pred, target, valid)]
        if hasattr(self.loss_fn, 'terms'):
            return {f'loss_{name}': value for name, value in self.loss_fn.terms(*clips).items()}
        return {'loss_depth': self.loss_fn(*clips)}

    def predict(self, inputs, data_samples):
        with self.clip_length(self.batch_clip_length(data_samples)):
            return super().predict(inputs, data_samples)

    def extract_features(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        """Fused neck maps of whole clips '(b t) c h w', deepest first."""
        if inputs.shape[0] % self.frames:
            raise ValueError(f"a batch of {inputs.shape[0]} frames is not whole clips of {self.frames} frames: "
                             f"give clips of `frames` consecutive frames each")
        maps, prefixes = self.backbone.forward_taps(inputs)
        return self.neck(maps, prefixes, frames=self.frames)

    @torch.no_grad()
    def predict_clips(self, clips: torch.Tensor) -> torch.Tensor:
        """Depth of normalised clips 'b t 3 H W' (t at most the neck's ``max_frames``) -> 'b t H W'."""
        b, t = clips.shape[:2]
        with self.clip_length(t):
            depth = self.predict_tensor(rearrange(clips, 'b t c h w -> (b t) c h w'))
        return rearrange(depth, '(b t) 1 h w -> b t h w', b=b)

    @torch.no_grad()
    def predict_video(self, frames: torch.Tensor, windows: VideoWindows | None = None) -> torch.Tensor:
        """Depth 'n H W' of a video of any length, normalised frames 'n 3 H W', by overlapping windows aligned to
        each other (:mod:`.video_windows`; the released models': windows of 32 frames); a metric model's windows are
        not rescaled."""
        return self.video_inference(self.predict_tensor, frames, windows)[:, 0]

    def video_inference(self, infer: Callable[[torch.Tensor], torch.Tensor], frames: torch.Tensor,
                        windows: VideoWindows | None = None) -> torch.Tensor:
        """``infer`` ('t 3 H W' -> 't 1 h w', one clip) over a video's frames 'n 3 H W' by aligned windows
        -> 'n 1 h w'."""
        def clip_depth(clip: torch.Tensor) -> torch.Tensor:  # 't 3 H W' -> 't h w'
            with self.clip_length(clip.shape[0]):
                return infer(clip)[:, 0]
        return video_depth(clip_depth, frames, metric=not self.relative, windows=windows or VideoWindows())[:, None]

    @torch.no_grad()
    def predict_sequence(self, inputs: torch.Tensor, data_samples, windows: VideoWindows | None = None):
        """The frames of one video in order, preprocessed as one batch 'n 3 H W' (``data_preprocessor``), predicted
        by :meth:`video_inference` with the configured whole-image strategy (``test_cfg``: flip, padding) and put
        on their samples at each frame's original size, as :meth:`predict` does for images. A sliding-window or
        tiled ``test_cfg`` is refused: its windows would cut each frame, not the video."""
        mode = self.inference_mode
        if mode.mode != 'whole':
            raise ValueError(f"a video is predicted whole-frame: this model's test_cfg mode={mode.mode!r} cuts "
                             f"frames into windows or tiles; use test_cfg=dict(mode='whole') for video")
        infer = self.head_output if mode.resizes_padding else self.predict_tensor
        if mode.flip:
            infer = partial(flip_average, infer)
        return self.store_predictions(self.video_inference(infer, inputs, windows), inputs, data_samples)

    @torch.no_grad()
    def predict_next(self, frames: torch.Tensor, cache: TemporalCache) -> torch.Tensor:
        """Depth 'b H W' of the next frame of ``b`` streams, normalised 'b 3 H W': its temporal attentions also attend
        the frames whose states ``cache`` holds (its context; none: the first frame) and record this frame's in it.
        One step of :class:`.video_stream.VideoDepthStream`, which keeps the cache."""
        maps, prefixes = self.backbone.forward_taps(frames)
        features = self.neck(maps, prefixes, frames=1, cache=cache)
        return resize_to(self.decode_head(self.head_input(features, self.decode_head)), frames.shape[-2:])[:, 0]

    def stream(self, **window) -> VideoDepthStream:
        """A :class:`.video_stream.VideoDepthStream` of this model (the authors' streaming inference): call it on
        each frame in turn; ``window``: its ``length`` and ``kept`` (the released models': 32, 41)."""
        return VideoDepthStream(self, **window)


def video_depth_anything_config(encoder: str = 'vits', metric: bool = False, frames: int = 32,
                                **backbone_overrides) -> dict:
    """The model config of the released Video Depth Anything ``encoder`` ('vits', 'vitb', 'vitl'), relative
    (inverse depth) or ``metric`` (metres, a ReLU head); ``frames``: the clip length of its batches."""
    if encoder not in ENCODERS:
        raise ValueError(f"unknown Video Depth Anything encoder {encoder!r}; choose one of {', '.join(ENCODERS)}")
    cfg = depth_anything_v2_config(encoder, **backbone_overrides)
    _, _, widths, fusion = DEPTH_ANYTHING_V2[encoder]
    cfg.update(type='VideoDepthEstimator', frames=frames,
               neck=dict(type='VideoDepthAnythingNeck', hidden_channels=widths, fusion_channels=fusion))
    if metric:
        cfg['decode_head'].update(mode='metric', output='relu', max_depth=1.0)
        cfg['max_depth'] = 80.0
    return cfg
