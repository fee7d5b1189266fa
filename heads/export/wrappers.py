"""Tensor-in / tensors-out modules around models whose forward is not (what torch.export and ONNX trace): a task model
(DPT, UperNet: one dense output; Mask2Former, EoMT: class and mask logits), a video model's clip, or a backbone's
maps. Each holds ``max_batch``: the largest batch its graph takes."""
from __future__ import annotations

import torch
from torch import nn

from zoo.contract import Backbone

from ..models.dense_model import DenseModel
from ..models.depth_estimator import DepthEstimator
from ..models.mask_classifier import MaskClassificationModel
from ..models.video_depth_anything import VideoDepthEstimator

MASK_OUTPUTS = ['class_logits', 'mask_logits']  # a mask-classification model's outputs, in its 'tensor' order
MAX_BATCH = 1024  # the largest batch of an exported image model


class TensorOutputs(nn.Module):
    """A task model as 'b 3 H W' normalised image -> ``model(x, mode='tensor')`` (the data preprocessor's
    normalisation is not included: feed ``(image - mean) / std`` as the model's ``data_preprocessor`` does):

    - a dense model (DPT, UperNet: :class:`~heads.models.dense_model.DenseModel`): its output at the input size,
      segmentation logits 'b k H W' ('seg_logits') or depth 'b 1 H W' ('depth');
    - a mask-classification model (Mask2Former, EoMT): the tuple (class logits 'b q c+1', mask logits 'b q h w' at
      the model's mask stride), named :data:`MASK_OUTPUTS`.
    """

    max_batch = MAX_BATCH

    def __init__(self, model: DenseModel | MaskClassificationModel):
        super().__init__()
        self.model = model
        if isinstance(model, MaskClassificationModel):
            self.output_names = list(MASK_OUTPUTS)
        else:
            self.output_names = ['depth' if isinstance(model, DepthEstimator) else 'seg_logits']

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        out = self.model(x, mode='tensor')  # b 3 H W -> b k H W, or (b q c+1, b q h w)
        return tuple(out) if isinstance(out, (tuple, list)) else out


class ClipOutputs(nn.Module):
    """A video model (:class:`~heads.models.video_depth_anything.VideoDepthEstimator`) as one clip: normalised frames
    't 3 H W' -> depth 't 1 H W' ('depth'), the batch being the clip's frames (1 to the neck's ``max_frames``,
    ``max_batch``); a longer video runs in windows of clips (:mod:`heads.models.video_windows`)."""

    output_names = ['depth']

    def __init__(self, model: VideoDepthEstimator):
        super().__init__()
        self.model = model
        self.max_batch = model.neck.max_frames

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.model.clip_length(x.shape[0]):
            return self.model.predict_tensor(x)


class MapOutputs(nn.Module):
    """A backbone (:mod:`zoo.contract`: a zoo backbone, :class:`heads.detection.PyramidBackbone`) returning its maps as
    a tuple: 'b 3 H W' -> ('b c H/s W/s' for s in ``model.out_strides``), outputs named 'stride4', 'stride8', ...;
    maps that share a stride (the taps of a plain ViT) are named by tap and stride: 'tap0_stride16', ..."""

    max_batch = MAX_BATCH

    def __init__(self, model: Backbone):
        super().__init__()
        self.model = model
        strides = list(model.out_strides)
        unique = len(set(strides)) == len(strides)
        self.output_names = [f'stride{s}' if unique else f'tap{i}_stride{s}' for i, s in enumerate(strides)]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.model(x))


def exportable(model: nn.Module) -> nn.Module:
    """``model`` as a tensor-in / tensors-out module in eval mode (already wrapped models are returned as they
    are): a video model in :class:`ClipOutputs`, another task model in :class:`TensorOutputs`, a backbone
    (:mod:`zoo.contract`) in :class:`MapOutputs`."""
    if isinstance(model, (TensorOutputs, ClipOutputs, MapOutputs)):
        wrapped = model
    elif isinstance(model, VideoDepthEstimator):
        wrapped = ClipOutputs(model)
    elif isinstance(model, (DenseModel, MaskClassificationModel)):
        wrapped = TensorOutputs(model)
    elif isinstance(model, Backbone):
        wrapped = MapOutputs(model)
    else:
        raise TypeError(f"cannot export {type(model).__name__}: expected a task model (heads.Segmentor, "
                        f"heads.DepthEstimator, Mask2Former, EoMT) or a backbone (zoo.create_backbone, "
                        f"heads.detection.PyramidBackbone)")
    return wrapped.eval()
