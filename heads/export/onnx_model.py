"""An exported task model run through onnxruntime with the checkpoint's own pre- and post-processing.

:class:`OnnxTaskModel` (DPT, UperNet: one dense output), :class:`OnnxVideoModel` (a video model's clip) and
:class:`OnnxMaskModel` (Mask2Former, EoMT: class and mask logits) stand where the PyTorch task model stands in
``heads.Predictor`` and in an evaluation loop: ``model.data_preprocessor(data)`` (the same
:class:`heads.models.preprocessor.DensePreprocessor`, built from the file's metadata, :mod:`heads.export.metadata`) then
``model(inputs, data_samples, mode='predict')``. The prediction runs the task model's own code: for a dense model
:meth:`DenseModel.inference` (whole image, sliding window, tiles, flip), :meth:`DenseModel.predict` (crop of the
padding, resize to the original size) and the task's ``store_prediction``; for a mask model
:meth:`MaskClassificationModel.predict` (semantic, instance and panoptic results by the file's ``test_cfg``, sliding
window for semantic ones). Only the network is the ONNX graph: 'b 3 H W' -> the output at the input size
(``mode='tensor'``), or the class and mask logits.

:func:`load_onnx_model` opens either kind by the file's ``task``; :class:`OnnxPredictor` is :class:`heads.Predictor`
for such a file: the same call, the same resize.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ..models.dense_model import DenseModel
from ..models.depth_estimator import DepthEstimator
from ..models.inference_mode import DENSE, MASK, InferenceMode, tiled_cfg
from ..models.mask_classifier import MaskClassificationModel
from ..models.predictor import Predictor
from ..models.preprocessor import DensePreprocessor
from ..models.segmentor import Segmentor
from ..models.video_depth_anything import VideoDepthEstimator
from .metadata import read_metadata
from .onnx_file import OnnxFileError, open_session, run_session

TASKS = {'Segmentor': Segmentor, 'DepthEstimator': DepthEstimator}
MASK_TASK = 'MaskClassifier'


class OnnxModel:
    """What both kinds share: the file's metadata, the preprocessor built from it, the onnxruntime session (CPU,
    ``threads`` intra-op threads), the class names and palette, and the task model's call modes. ``metadata``: the
    file's, when already read (reading parses the whole file); a subclass's :meth:`check_task` refuses another
    kind's file before a session is made."""

    def __init__(self, path, threads: int | None = None, metadata: dict | None = None):
        self.path = Path(path)
        self.metadata = meta = read_metadata(self.path) if metadata is None else metadata
        self.check_task(meta)
        self.relative = bool(meta.get('relative', False))
        self.input_multiple = int(meta['input_multiple'])
        pre = dict(meta['preprocessor'])
        pre['size_divisor'] = math.lcm(int(pre.get('size_divisor', 1)), self.input_multiple)
        self.data_preprocessor = DensePreprocessor(**pre).eval()
        self.session = open_session(self.path, threads)
        self.input_name = self.session.get_inputs()[0].name
        self.classes = list(meta.get('classes') or [])
        self.palette = meta.get('palette') or None
        self.predict_scale = tuple(meta['predict_scale']) if meta.get('predict_scale') else None

    def check_task(self, meta: dict) -> None:
        raise NotImplementedError

    @property
    def test_cfg(self) -> dict:
        """The inference mode (:class:`heads.models.inference_mode.InferenceMode`, checked when this object is
        made: the file's ``test_cfg`` with the caller's entries over it) as a plain ``test_cfg``."""
        return self.inference_mode.as_cfg()

    def run(self, inputs: torch.Tensor, names: list[str]) -> list[torch.Tensor]:
        """The graph's outputs ``names`` for 'b 3 H W' inputs (float32 on the CPU)."""
        x = np.ascontiguousarray(inputs.detach().float().cpu().numpy())
        return [torch.from_numpy(out) for out in run_session(self.path, self.session, names, {self.input_name: x})]

    def __call__(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        if mode == 'tensor':
            return self.tensor(inputs)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        raise ValueError(f"an ONNX task model runs mode 'tensor' or 'predict', got {mode!r}")

    def eval(self):
        return self

    def to(self, device):
        if torch.device(device).type != 'cpu':
            raise ValueError(f"ONNX models run on onnxruntime's CPU provider here; got device {device!r}: use 'cpu'")
        return self


class OnnxTaskModel(OnnxModel):
    """``OnnxTaskModel(path, threads=None, test_cfg=None)``: the ONNX file ``path`` of a dense task model (written by
    :func:`heads.export.export_onnx`, so carrying its metadata) as a task model for prediction.

    ``test_cfg`` entries override the file's (e.g. ``mode='tile'``, ``crop_size``, ``overlap``). ``threads``:
    onnxruntime's intra-op threads. Images are padded to multiples of the preprocessor's ``size_divisor`` and of
    the graph's input multiple (the same padding as the checkpoint's whenever the first is a multiple of the second,
    as in this project's configs). test_cfg padding='resize' (mmseg's whole-image mode: the head's own-resolution
    output resized) is refused: the graph gives the output at the input size only.
    """

    # the task model's own prediction code, run on this object (it reads inference_mode, relative, predict_tensor,
    # store_prediction)
    inference = DenseModel.inference
    predict = DenseModel.predict
    store_predictions = DenseModel.store_predictions

    def __init__(self, path, threads: int | None = None, test_cfg: dict | None = None,
                 metadata: dict | None = None):
        super().__init__(path, threads, metadata)
        meta = self.metadata
        self.task = TASKS[meta['task']]
        self.inference_mode = InferenceMode.from_cfg({**meta['test_cfg'], **(test_cfg or {})}, DENSE,
                                                     self.input_multiple, where=str(self.path))
        if self.inference_mode.resizes_padding:
            raise OnnxFileError(f"{self.path}: test_cfg padding='resize' resizes the head's own-resolution output, "
                                f"which the ONNX graph does not give (it outputs at the input size); export a model "
                                f"with padding='crop' or predict with --tile")
        self.output_name = meta['output']

    def check_task(self, meta: dict) -> None:
        if meta['task'] == MASK_TASK:
            raise ValueError(f"{self.path}: this {meta.get('model', 'mask-classification')} export gives class "
                             f"logits 'b q c+1' and mask logits 'b q h w' (outputs {meta.get('outputs')}), not one "
                             f"dense output: open it with heads.export.OnnxMaskModel or load_onnx_model")
        if meta['task'] not in TASKS:
            raise ValueError(f"{self.path}: task {meta['task']!r} in its metadata is not one of "
                             f"{sorted([*TASKS, MASK_TASK])}")

    def predict_tensor(self, inputs: torch.Tensor) -> torch.Tensor:
        """The graph's output at the input size: 'b 3 H W' -> 'b k H W' (float32 on the CPU)."""
        return self.run(inputs, [self.output_name])[0]

    tensor = predict_tensor

    def head_output(self, inputs: torch.Tensor) -> torch.Tensor:
        raise ValueError('the ONNX graph gives the output at the input size only (padding="resize" is refused)')

    def store_prediction(self, sample, output: torch.Tensor) -> None:
        self.task.store_prediction(self, sample, output)


class OnnxMaskModel(OnnxModel):
    """``OnnxMaskModel(path, threads=None, test_cfg=None)``: the ONNX file ``path`` of a mask-classification model
    (Mask2Former, EoMT; outputs ``class_logits`` 'b q c+1' and ``mask_logits`` 'b q h w') as a task model for
    prediction: semantic, instance and panoptic results by the file's ``test_cfg`` (``test_cfg`` entries override
    it, checked as the model checks its own), post-processed by the model's own code. Padding as
    :class:`OnnxTaskModel`'s.
    """

    # the model's own prediction code, run on this object (it reads inference_mode and forward_logits)
    predict = MaskClassificationModel.predict
    semantic_inference = MaskClassificationModel.semantic_inference
    store_predictions = MaskClassificationModel.store_predictions
    store_semantic = staticmethod(MaskClassificationModel.store_semantic)

    def __init__(self, path, threads: int | None = None, test_cfg: dict | None = None,
                 metadata: dict | None = None):
        super().__init__(path, threads, metadata)
        meta = self.metadata
        self.num_classes = int(meta['num_classes'])
        self.output_names = list(meta['outputs'])
        self.inference_mode = InferenceMode.from_cfg({**meta['test_cfg'], **(test_cfg or {})}, MASK,
                                                     self.input_multiple, self.num_classes, where=str(self.path))

    def check_task(self, meta: dict) -> None:
        if meta['task'] != MASK_TASK:
            raise ValueError(f"{self.path}: task {meta['task']!r} is not a mask-classification model's; open it "
                             f"with heads.export.OnnxTaskModel or load_onnx_model")

    def forward_logits(self, inputs: torch.Tensor):
        """'b 3 H W' -> (class_logits 'b q c+1', mask_logits 'b q h w', no auxiliary layers)."""
        class_logits, mask_logits = self.run(inputs, self.output_names)
        return class_logits, mask_logits, []

    def tensor(self, inputs: torch.Tensor):
        return self.forward_logits(inputs)[:2]


class OnnxVideoModel(OnnxTaskModel):
    """``OnnxVideoModel(path, threads=None, test_cfg=None)``: the ONNX file of a video model's clip (Video Depth
    Anything; :class:`heads.export.wrappers.ClipOutputs`: 't 3 H W' -> 't 1 H W', the batch being one clip of at
    most the file's ``clip['max_frames']`` frames) predicting a video's frames by the model's own windows
    (:meth:`VideoDepthEstimator.predict_sequence`), as ``heads.Predictor.video`` runs it; a batch of images (one
    image, from ``heads.Predictor``) is one clip."""

    predict_sequence = VideoDepthEstimator.predict_sequence
    video_inference = VideoDepthEstimator.video_inference
    clip_length = VideoDepthEstimator.clip_length

    def __init__(self, path, threads: int | None = None, test_cfg: dict | None = None,
                 metadata: dict | None = None):
        super().__init__(path, threads, test_cfg, metadata)
        self.frames = self.max_frames = int(self.metadata['clip']['max_frames'])


def load_onnx_model(path, threads: int | None = None, test_cfg: dict | None = None) -> OnnxModel:
    """The ONNX file ``path`` as the task model its metadata names: :class:`OnnxMaskModel` for Mask2Former and
    EoMT, :class:`OnnxVideoModel` for a video model's clip, :class:`OnnxTaskModel` for the other dense ones."""
    meta = read_metadata(path)
    kind = OnnxMaskModel if meta['task'] == MASK_TASK else OnnxVideoModel if meta.get('clip') else OnnxTaskModel
    return kind(path, threads, test_cfg, metadata=meta)


class OnnxPredictor(Predictor):
    """:class:`heads.Predictor` for an exported ONNX file: ``OnnxPredictor(path, tile=None, overlap=64,
    threads=None)(image)`` -> a label map (or a mask model's panoptic map) or a depth map at the image's size,
    resized first by the file's ``predict_scale`` (none with ``tile``), as the checkpoint's Predictor does."""

    def __init__(self, path, device: str = 'cpu', tile=None, overlap: int = 64, threads: int | None = None):
        test_cfg = None if tile is None else tiled_cfg(None, tile, overlap)
        self.model = load_onnx_model(path, threads, test_cfg).to(device)
        self.kernel_policy = None
        self.device = device
        self.scale = None if tile is not None else self.model.predict_scale
