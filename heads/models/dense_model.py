"""The shared part of the task models: backbone -> DPT neck -> head, inference strategies, outputs per image."""
from __future__ import annotations

import math
from abc import abstractmethod
from fractions import Fraction
from functools import partial

import torch
from torch import nn

from zoo.core.resize import interpolate

from ..registry import MODELS
from .backbone import backbone_description
from .inference import flip_average, slide_inference
from .inference_mode import DENSE, InferenceMode
from .task_model import TaskModel
from .tiling import tiled_inference


def build(part):
    """A module from a config dict (or an already built module)."""
    return part if isinstance(part, nn.Module) or part is None else MODELS.build(part)


class DenseModel(TaskModel):
    """Backbone + neck (its input described from the backbone) + decode head, as an mmengine model.

    ``test_cfg``: ``mode`` 'whole', 'slide' (with ``crop_size`` and ``stride``: the average of overlapping crops)
    or 'tile' (with ``crop_size``, ``overlap`` and optional ``ramp``: any resolution, tiles blended with smooth
    weights, a relative depth model's tiles aligned by scale and shift; :mod:`.tiling`), ``flip`` for test-time
    mirroring, ``padding``: what whole-image inference does with the batch's padding, 'crop' (the head output
    resized to the padded input, the padding cut off) or 'resize' (mmseg: the head output of the padded input
    resized straight to the image's unpadded size, as mmseg's ViT pads to its patch size and resizes back; exact
    for batches of one image). ``channels_last``: neck and head convolutions in channels-last layout (same
    results). ``test_cfg`` is checked when the model is built (:class:`.inference_mode.InferenceMode`, the
    ``inference_mode`` attribute). Subclasses define ``loss`` and turn head outputs into predictions.
    Modes: 'tensor' -> head output at the input size; 'loss' -> dict of losses; 'predict' -> data samples.
    """
    #: the parts whose stride-1 convolutions run on maps large enough for the shifted-GEMM weight gradient to pay
    #: off on some CPUs (:func:`zoo.runtime.apply_kernel_policy` reads this; the model never changes for it)
    gemm_weight_grad_parts = ('neck', 'decode_head')
    #: whether predictions are relative (inverse depth up to scale and shift): test_cfg mode='tile' then aligns each
    #: tile to the blend so far (:mod:`.tiling`); :class:`~heads.models.depth_estimator.DepthEstimator` sets it
    relative = False

    def __init__(self, backbone, decode_head, neck=None, data_preprocessor=None, test_cfg=None,
                 channels_last: bool = True, init_cfg=None):
        super().__init__(data_preprocessor=build(data_preprocessor or dict(type='DensePreprocessor')),
                         init_cfg=init_cfg)
        self.backbone = build(backbone)
        neck = dict(type='DPTNeck') if neck is None else neck
        self.neck = build({**backbone_description(self.backbone), **neck} if isinstance(neck, dict) else neck)
        self.decode_head = self.build_head(decode_head)
        self.channels_last = channels_last
        self.prepare_convolutional_parts(self.neck, self.decode_head)
        self.inference_mode = InferenceMode.from_cfg(test_cfg, DENSE, self.input_multiple, where=type(self).__name__)

    @property
    def test_cfg(self) -> dict:
        """The inference mode as a plain ``test_cfg`` (defaults filled in)."""
        return self.inference_mode.as_cfg()

    def build_head(self, head):
        """A head from its config; one that reads every level (UperNet's) and names no ``in_channels`` gets the
        neck's ``level_channels`` (finest first), so that one config fits any backbone."""
        kind = head.get('type') if isinstance(head, dict) else None
        reads_levels = getattr(kind if isinstance(kind, type) else MODELS.get(kind) if kind else None, 'reads_levels',
                               False)
        if reads_levels and head.get('in_channels') is None and hasattr(self.neck, 'level_channels'):
            head = {**head, 'in_channels': list(self.neck.level_channels)}
        return build(head)

    @property
    def input_multiple(self) -> int:
        """What input height and width must be multiples of: the backbone's multiple and every neck level's stride
        (fusion adds each level to the x2 upsampled coarser one). A fractional stride p/q (3.5 = 7/2 for a patch-14
        encoder's x4 level) divides a side into whole pixels where p does."""
        numerators = (Fraction(stride).limit_denominator(64).numerator for stride in self.neck.level_strides)
        return math.lcm(self.backbone.input_multiple, *numerators)

    @property
    def coarsest_stride(self) -> int:
        """The largest stride of any map the model computes (a neck whose maps go coarser than its levels' strides
        says so by its ``coarsest_stride``: Depth Anything's)."""
        return max(*self.backbone.out_strides, *self.neck.level_strides, getattr(self.neck, 'coarsest_stride', 0))

    def prepare_convolutional_parts(self, *parts) -> None:
        """Conv weights in channels-last layout with ``channels_last`` (faster convolutions on CPU and GPU; token
        maps from ViT backbones already are 'b h w c' in memory). Kernels are not chosen here
        (:func:`zoo.runtime.apply_kernel_policy`)."""
        for part in parts:
            if part is not None and self.channels_last:
                part.to(memory_format=torch.channels_last)

    def extract_features(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        """Fused neck maps, deepest first."""
        maps, prefixes = self.backbone.forward_taps(inputs)
        return self.neck(maps, prefixes)

    @staticmethod
    def head_input(features: list[torch.Tensor], head: nn.Module):
        """What ``head`` reads of the neck's maps (deepest first): the finest, or every level finest first for a
        head with ``reads_levels`` (UperNet's heads)."""
        return features[::-1] if getattr(head, 'reads_levels', False) else features[-1]

    def predict_tensor(self, inputs: torch.Tensor) -> torch.Tensor:
        """Head output resized to the input size: 'b c H W -> b k H W'."""
        out = self.head_output(inputs)
        if out.shape[-2:] != inputs.shape[-2:]:
            out = interpolate(out, size=inputs.shape[-2:], mode='bilinear', align_corners=False)
        return out

    def head_output(self, inputs: torch.Tensor) -> torch.Tensor:
        """The head's output at its own resolution: 'b c H W -> b k h w'."""
        return self.decode_head(self.head_input(self.extract_features(inputs), self.decode_head))

    def inference(self, inputs: torch.Tensor) -> torch.Tensor:
        """The test-time prediction with the configured strategy (at the head's resolution with padding='resize'
        in whole mode, else at the input size)."""
        mode = self.inference_mode
        infer = self.head_output if mode.resizes_padding else self.predict_tensor
        if mode.mode == 'slide':
            infer = partial(slide_inference, self.predict_tensor, crop=mode.crop_size, stride=mode.stride)
        elif mode.mode == 'tile':  # a relative depth model's tiles aligned by scale and shift
            infer = partial(tiled_inference, self.predict_tensor, tile=mode.crop_size, overlap=mode.overlap,
                            align=self.relative, ramp=mode.ramp)
        return flip_average(infer, inputs) if mode.flip else infer(inputs)

    def forward(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        if mode == 'tensor':
            return self.predict_tensor(inputs)
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        raise ValueError(f"mode must be 'tensor', 'loss' or 'predict', got {mode!r}")

    def predict(self, inputs: torch.Tensor, data_samples):
        return self.store_predictions(self.inference(inputs), inputs, data_samples)

    def store_predictions(self, outputs: torch.Tensor, inputs: torch.Tensor, data_samples):
        """Each output of :meth:`inference` 'b k h w' put on its sample at the image's original size (the padding
        cut off, or the whole padded output stretched onto the image with padding='resize')."""
        for out, sample in zip(outputs, data_samples):
            h, w = sample.metainfo.get('img_shape', inputs.shape[-2:])
            if self.inference_mode.resizes_padding:  # the whole padded input's output, stretched onto the image
                out = interpolate(out[None], size=(h, w), mode='bilinear', align_corners=False)
            else:
                out = out[None, :, :h, :w]
            ori = tuple(sample.metainfo.get('ori_shape', (h, w)))
            if ori != (h, w):
                out = interpolate(out, size=ori, mode='bilinear', align_corners=False)
            self.store_prediction(sample, out[0])
        return data_samples

    @abstractmethod
    def store_prediction(self, sample, output: torch.Tensor) -> None:
        """Put one image's output 'k h w' (original size) on its data sample."""

    @abstractmethod
    def loss(self, inputs: torch.Tensor, data_samples) -> dict:
        """The task's losses for a batch."""
