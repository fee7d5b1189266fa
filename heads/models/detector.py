"""A torchvision Faster / Mask R-CNN on a zoo backbone as an mmengine model (train, validate, test by config)."""
from __future__ import annotations

from mmengine.structures import BaseDataElement

from ..detection import build_detector
from ..registry import MODELS
from .task_model import TaskModel


@MODELS.register_module()
class TorchvisionDetector(TaskModel):
    """:func:`heads.detection.build_detector` (``kind``, ``backbone``, ``num_classes``, ``**detector``) trained
    with torchvision's losses. Batches are lists: ``inputs`` of '3 h w' uint8 images, ``data_samples`` of
    elements whose fields are torchvision targets (boxes xyxy, labels, masks; :class:`~heads.datasets.
    CocoDetectionDataset`). The detector resizes (``min_size``/``max_size``) and normalises itself; predictions
    (fields boxes, scores, labels[, masks], metainfo of the sample) are in input-image pixels."""

    def __init__(self, kind: str, backbone: str, num_classes: int, data_preprocessor=None, init_cfg=None, **detector):
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.detector = build_detector(kind, backbone, num_classes, **detector)

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        images = [image.float() / 255 for image in inputs]
        if mode == 'loss':
            targets = [dict(s.items()) for s in data_samples]
            return self.detector(images, targets)
        if mode == 'predict':  # torchvision detectors detect in eval mode only
            was_training = self.detector.training
            self.detector.eval()
            outputs = self.detector(images)
            self.detector.train(was_training)
            return [BaseDataElement(metainfo=s.metainfo, **output, **self._ground_truth(s))
                    for output, s in zip(outputs, data_samples)]
        if mode == 'tensor':  # the pyramid's maps of the resized, normalised batch
            batch, _ = self.detector.transform(images)
            return self.detector.backbone(batch.tensors)
        raise ValueError(f"mode must be 'loss', 'predict' or 'tensor', got {mode!r}")

    @staticmethod
    def _ground_truth(sample) -> dict:
        """The sample's boxes and labels as gt_boxes / gt_labels (PredictionVisualizationHook draws them)."""
        return {f'gt_{key}': sample.get(key) for key in ('boxes', 'labels') if key in sample}
