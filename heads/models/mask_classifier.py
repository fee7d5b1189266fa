"""The shared part of mask-classification models (Mask2Former, EoMT): targets, losses and predictions around a
subclass's ``forward_logits``.

A subclass implements ``forward_logits(inputs 'b 3 H W') -> (class_logits 'b q c+1', mask_logits 'b q h w',
aux)``, ``aux`` a list of ``(class_logits, mask_logits)`` of the intermediate layers (empty when it has none or
does not compute them, e.g. in eval mode); mask logits cover the whole padded input (any resolution, usually
H/4 x W/4). Modes: 'tensor' -> ``(class_logits, mask_logits)`` (transformers' ``class_queries_logits`` and
``masks_queries_logits``); 'loss' -> :class:`~heads.losses.mask_classification.MaskClassificationLoss` on the
final and every auxiliary layer; 'predict' -> data samples with, at each image's original size, by
``test_cfg['tasks']``:

- 'semantic': ``seg_logits`` (PixelData 'c h w', the class scores) and ``pred_sem_seg`` ('1 h w'), as
  :class:`~heads.models.segmentor.Segmentor` stores them (the scores computed on the padded input, cropped to the
  image and resized to its original size, as mmseg's Mask2Former does; ``test_cfg`` mode 'slide' averages them
  over overlapping crops);
- 'instance': ``pred_instances`` (InstanceData: ``masks`` 'k h w' bool, ``labels`` 'k', ``scores`` 'k'; no
  ``stuff_classes``);
- 'panoptic': ``pred_panoptic_seg`` (PixelData '1 h w' int64, ``label + instance * INSTANCE_OFFSET``, no segment
  = ``num_classes``), with ``segments_info`` in its metainfo.

For instance and panoptic results the mask logits are resized to the padded input, cropped and resized to the
original size first (detectron2 and transformers' EoMT processor), only those of the queries each result uses (the
top-k pairs' queries, the confident queries), so that memory stays small for large images.

Targets per sample: ``gt_instances`` (InstanceData with ``labels`` 'n' and ``masks`` 'n h w') when present, else
one mask per class present in ``gt_sem_seg`` (255 excluded), as mmseg's Mask2Former derives them; both padded
(zeros) to the batch's input size.
"""
from __future__ import annotations

from abc import abstractmethod

import torch
from mmengine.structures import InstanceData, PixelData

from zoo.core.resize import interpolate

from ..io.labels import IGNORE_INDEX
from .dense_model import build
from .inference import slide_inference
from .inference_mode import MASK, InferenceMode
from .mask_inference import instance_results, panoptic_map, semantic_scores
from .task_model import TaskModel


def masks_from_semantic(seg: torch.Tensor, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A label map 'h w' -> its classes 'n' (int64, increasing) and their masks 'n h w' (bool); ``IGNORE_INDEX``
    pixels belong to no mask."""
    classes = seg.unique()
    classes = classes[classes != IGNORE_INDEX].long()
    if len(classes) and classes.max() >= num_classes:
        raise ValueError(f"gt_sem_seg has label {classes.max().item()} but the model has num_classes={num_classes} "
                         f"(labels must be in [0, {num_classes}) or {IGNORE_INDEX} for ignored pixels)")
    return classes, seg[None] == classes[:, None, None].to(seg.dtype)


def pad_masks(masks: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """'n h w' -> 'n H W', zeros added at the bottom and right."""
    h, w = masks.shape[-2:]
    if (h, w) == tuple(size):
        return masks
    if h > size[0] or w > size[1]:
        raise ValueError(f"a target mask of {h}x{w} is larger than the batch input {size[0]}x{size[1]}; targets "
                         f"must have the image's size (before the preprocessor's padding)")
    return torch.nn.functional.pad(masks, (0, size[1] - w, 0, size[0] - h))


class MaskClassificationModel(TaskModel):
    """Base of the mask-classification models (module docstring). ``loss``: the loss config (type
    ``MaskClassificationLoss`` by default; ``num_classes`` filled in). ``test_cfg``: ``tasks`` (any of 'semantic',
    'instance', 'panoptic'; default ('semantic',)), for instances ``top_k`` (default: the number of queries) and
    ``score_threshold`` (0), for panoptic maps ``object_threshold`` (0.8), ``mask_threshold`` (0.5),
    ``overlap_threshold`` (0.8) and ``stuff_classes`` (the class indices whose segments merge; default none);
    ``mode`` 'whole' or, for semantic results only, 'slide' (with ``crop_size`` and ``stride``: the class scores
    averaged over overlapping crops, as :class:`~heads.models.segmentor.Segmentor` slides)."""

    def __init__(self, num_classes: int, data_preprocessor=None, loss=None, test_cfg=None, init_cfg=None):
        super().__init__(data_preprocessor=build(data_preprocessor or dict(type='DensePreprocessor')),
                         init_cfg=init_cfg)
        self.num_classes = num_classes
        self.criterion = build({'type': 'MaskClassificationLoss', 'num_classes': num_classes, **(loss or {})})
        self.inference_mode = InferenceMode.from_cfg(test_cfg, MASK, num_classes=num_classes,
                                                     where=type(self).__name__)

    def check_windows(self) -> None:
        """The slide windows (``crop_size``) checked against :attr:`input_multiple`, once the subclass has built
        what fixes it: a subclass calls this at the end of its ``__init__`` (a window that is not a multiple would
        fail at prediction)."""
        if self.inference_mode.mode == 'slide':
            self.inference_mode = InferenceMode.from_cfg(self.inference_mode.as_cfg(), MASK, self.input_multiple,
                                                         self.num_classes, where=type(self).__name__)

    @property
    def test_cfg(self) -> dict:
        """The inference mode as a plain ``test_cfg`` (defaults filled in)."""
        return self.inference_mode.as_cfg()

    @abstractmethod
    def forward_logits(self, inputs: torch.Tensor):
        """'b 3 H W' -> (class_logits 'b q c+1', mask_logits 'b q h w', aux: list of (class, mask) logits)."""

    def forward(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        if mode == 'tensor':
            return self.forward_logits(inputs)[:2]
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        raise ValueError(f"mode must be 'tensor', 'loss' or 'predict', got {mode!r}")

    def loss_layers(self, class_logits, mask_logits, aux) -> list:
        """The layers to supervise as ``(suffix, class_logits, mask_logits)``, in the order their losses are
        computed (the order of the random points): the final layer, then the intermediate ones (transformers'
        Mask2Former). A subclass may reorder them."""
        return [('', class_logits, mask_logits)] + [(f'_{i}', c, m) for i, (c, m) in enumerate(aux)]

    def targets(self, data_samples, size: tuple[int, int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per sample labels 'n' and masks 'n H W' (bool), padded to ``size`` (module docstring)."""
        labels, masks = [], []
        for i, sample in enumerate(data_samples):
            if 'gt_instances' in sample:
                label, mask = sample.gt_instances.labels.long(), sample.gt_instances.masks
                mask = torch.as_tensor(mask).bool()
            elif 'gt_sem_seg' in sample:
                label, mask = masks_from_semantic(sample.gt_sem_seg.data[0], self.num_classes)
            else:
                raise ValueError(f"data sample {i} has neither gt_instances nor gt_sem_seg: the mask-classification "
                                 f"loss needs one of them")
            labels.append(label)
            masks.append(pad_masks(mask, size))
        return labels, masks

    def loss(self, inputs: torch.Tensor, data_samples) -> dict:
        class_logits, mask_logits, aux = self.forward_logits(inputs)
        labels, masks = self.targets(data_samples, tuple(inputs.shape[-2:]))
        labels = [x.to(inputs.device) for x in labels]
        masks = [x.to(inputs.device) for x in masks]
        return self.criterion(self.loss_layers(class_logits, mask_logits, aux), labels, masks)

    def semantic_inference(self, inputs: torch.Tensor) -> torch.Tensor:
        """Class scores 'b c H W' at the input size: mask logits resized to the input, then combined."""
        class_logits, mask_logits = (x.float() for x in self.forward_logits(inputs)[:2])
        masks = interpolate(mask_logits, size=inputs.shape[-2:], mode='bilinear', align_corners=False)
        return torch.stack([semantic_scores(c, m) for c, m in zip(class_logits, masks)])

    def predict(self, inputs: torch.Tensor, data_samples):
        mode = self.inference_mode
        if mode.mode == 'slide':
            scores = slide_inference(self.semantic_inference, inputs, crop=mode.crop_size, stride=mode.stride)
            for image, sample in enumerate(data_samples):
                self.store_semantic(sample, scores[image], tuple(inputs.shape[-2:]))
            return data_samples
        class_logits, mask_logits = self.forward_logits(inputs)[:2]
        for image, sample in enumerate(data_samples):
            self.store_predictions(sample, class_logits[image], mask_logits[image], tuple(inputs.shape[-2:]))
        return data_samples

    @staticmethod
    def store_semantic(sample, scores: torch.Tensor, input_size: tuple[int, int]) -> None:
        """``seg_logits`` and ``pred_sem_seg`` from the padded input's class scores 'c H W': cropped to the image,
        resized to its original size."""
        h, w = sample.metainfo.get('img_shape', input_size)
        ori = tuple(sample.metainfo.get('ori_shape', (h, w)))
        scores = scores[None, :, :h, :w]
        if ori != (h, w):
            scores = interpolate(scores, size=ori, mode='bilinear', align_corners=False)
        sample.seg_logits = PixelData(data=scores[0])
        sample.pred_sem_seg = PixelData(data=scores[0].argmax(dim=0, keepdim=True))

    def store_predictions(self, sample, class_logits: torch.Tensor, mask_logits: torch.Tensor,
                          input_size: tuple[int, int]) -> None:
        """One image's results by ``test_cfg`` on its data sample ('q c+1', 'q h w' for the padded input)."""
        mode = self.inference_mode
        class_logits, mask_logits = class_logits.float(), mask_logits.float()
        if 'semantic' in mode.tasks:
            padded = interpolate(mask_logits[None], size=input_size, mode='bilinear', align_corners=False)[0]
            self.store_semantic(sample, semantic_scores(class_logits, padded), input_size)
        h, w = sample.metainfo.get('img_shape', input_size)
        ori = tuple(sample.metainfo.get('ori_shape', (h, w)))

        def to_image(logits: torch.Tensor) -> torch.Tensor:
            """Some queries' mask logits 'n h w' -> the padded input, cropped to the image, at its original size."""
            out = interpolate(logits[None], size=input_size, mode='bilinear', align_corners=False)[:, :, :h, :w]
            return (out if ori == (h, w) else interpolate(out, size=ori, mode='bilinear', align_corners=False))[0]

        if 'instance' in mode.tasks:
            masks, labels, scores = instance_results(class_logits, mask_logits, mode.top_k, mode.score_threshold,
                                                     mode.stuff_classes, to_output=to_image)
            sample.pred_instances = InstanceData(masks=masks, labels=labels, scores=scores)
        if 'panoptic' in mode.tasks:
            panoptic, segments = panoptic_map(class_logits, mask_logits, mode.object_threshold, mode.mask_threshold,
                                              mode.overlap_threshold, mode.stuff_classes, to_output=to_image)
            sample.pred_panoptic_seg = PixelData(data=panoptic, metainfo={'segments_info': segments})
