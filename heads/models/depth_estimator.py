"""Monocular depth: DPT with a depth head (relative inverse depth or metric depth)."""
from __future__ import annotations

import torch
from mmengine.structures import PixelData

from ..registry import MODELS
from .dense_model import DenseModel, build
from .segmentor import resize_to


@MODELS.register_module()
class DepthEstimator(DenseModel):
    """Samples carry ``gt_depth`` (PixelData '1 h w' in metres, 0 = invalid).

    A 'relative' head is trained on inverse depth (scale-and-shift-invariant loss by default) and predicts
    relative inverse depth; a 'metric' head predicts metres (SiLog loss by default). Valid target pixels:
    ``min_depth < depth <= max_depth``. Predictions are ``pred_depth`` ('1 h w') at the original size.
    """

    def __init__(self, backbone, decode_head, neck=None, loss=None, min_depth: float = 1e-3,
                 max_depth: float = 10.0, **kwargs):
        super().__init__(backbone, decode_head, neck, **kwargs)
        self.relative = self.decode_head.mode == 'relative'
        default_loss = dict(type='ScaleShiftInvariantLoss' if self.relative else 'SiLogLoss')
        self.loss_fn = build(loss or default_loss)
        self.min_depth, self.max_depth = min_depth, max_depth

    def loss(self, inputs, data_samples) -> dict:
        return {'loss_depth': self.loss_fn(*self.loss_inputs(inputs, data_samples))}

    def loss_inputs(self, inputs, data_samples) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(prediction, target, valid), each 'b 1 h w' at the ground truth's size: the head's output, the inverse
        depth of a relative head (0 where invalid) or the depth of a metric one, and the valid pixels."""
        depth = torch.stack([s.gt_depth.data for s in data_samples]).float()  # b 1 h w
        valid = (depth > self.min_depth) & (depth <= self.max_depth)
        pred = resize_to(self.decode_head(self.extract_features(inputs)[-1]), depth.shape[-2:])
        target = torch.where(valid, 1.0 / depth.clamp(min=self.min_depth), 0.0) if self.relative else depth
        return pred, target, valid

    def store_prediction(self, sample, output: torch.Tensor) -> None:
        sample.pred_depth = PixelData(data=output)
