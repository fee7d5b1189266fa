"""An exported DPT task model run through onnxruntime with the checkpoint's own pre- and post-processing.

:class:`OnnxTaskModel` stands where the PyTorch task model stands in ``heads.Predictor`` and in an evaluation loop:
``model.data_preprocessor(data)`` (the same :class:`heads.models.preprocessor.DensePreprocessor`, built from the
file's metadata, :mod:`heads.export.metadata`) then ``model(inputs, data_samples, mode='predict')``. The prediction
runs the task model's own code (:meth:`DenseModel.inference`: whole image, sliding window, tiles, flip;
:meth:`DenseModel.predict`: crop of the padding, resize to the original size; the task's ``store_prediction``); only
the network, 'b 3 H W' -> the output at the input size (``mode='tensor'``), is the ONNX graph.

:class:`OnnxPredictor` is :class:`heads.Predictor` for such a file: the same call, the same resize.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ..models.dense_model import DenseModel
from ..models.depth_estimator import DepthEstimator
from ..models.predictor import Predictor
from ..models.preprocessor import DensePreprocessor
from ..models.segmentor import Segmentor
from .metadata import read_metadata
from .onnx import onnx_session

TASKS = {'Segmentor': Segmentor, 'DepthEstimator': DepthEstimator}


class OnnxTaskModel:
    """``OnnxTaskModel(path, threads=None, test_cfg=None)``: the ONNX file ``path`` (written by
    :func:`heads.export.export_onnx` from a task model, so carrying its metadata) as a task model for prediction.

    ``test_cfg`` entries override the file's (e.g. ``mode='tile'``, ``crop_size``, ``overlap``). ``threads``:
    onnxruntime's intra-op threads. Images are padded to multiples of the preprocessor's ``size_divisor`` and of
    the graph's input multiple (the same padding as the checkpoint's whenever the first is a multiple of the second,
    as in this project's configs). test_cfg padding='resize' (mmseg's whole-image mode: the head's own-resolution
    output resized) is refused: the graph gives the output at the input size only.
    """

    # the task model's own prediction code, run on this object (it reads test_cfg, predict_tensor, store_prediction)
    inference = DenseModel.inference
    predict = DenseModel.predict
    check_tile_cfg = DenseModel.check_tile_cfg
    resizes_padding = DenseModel.resizes_padding

    def __init__(self, path, threads: int | None = None, test_cfg: dict | None = None):
        self.path = Path(path)
        self.metadata = meta = read_metadata(self.path)
        if meta['task'] == 'MaskClassifier':
            raise ValueError(f"{self.path}: this {meta.get('model', 'mask-classification')} export gives class logits "
                             f"'b q c+1' and mask logits 'b q h w' (outputs {meta.get('outputs')}); their semantic, "
                             f"instance and panoptic post-processing is not in the ONNX graph and is not run on ONNX "
                             f"files yet: run the checkpoint in PyTorch, or the graph with heads.export.run_onnx")
        if meta['task'] not in TASKS:
            raise ValueError(f"{self.path}: task {meta['task']!r} in its metadata is not one of {sorted(TASKS)}")
        self.task = TASKS[meta['task']]
        self.relative = bool(meta.get('relative', False))
        self.input_multiple = int(meta['input_multiple'])
        self.test_cfg = {**meta['test_cfg'], **(test_cfg or {})}
        if self.test_cfg['mode'] == 'tile':
            self.check_tile_cfg()
        if self.resizes_padding:
            raise ValueError(f"{self.path}: test_cfg padding='resize' resizes the head's own-resolution output, which "
                             f"the ONNX graph does not give (it outputs at the input size); export a model with "
                             f"padding='crop' or predict with --tile")
        pre = dict(meta['preprocessor'])
        pre['size_divisor'] = math.lcm(int(pre['size_divisor']), self.input_multiple)
        self.data_preprocessor = DensePreprocessor(**pre).eval()
        self.session = onnx_session(self.path, threads)
        self.input_name = self.session.get_inputs()[0].name
        self.output_name = meta['output']
        self.classes = list(meta.get('classes') or [])
        self.palette = meta.get('palette')
        self.predict_scale = tuple(meta['predict_scale']) if meta.get('predict_scale') else None

    def predict_tensor(self, inputs: torch.Tensor) -> torch.Tensor:
        """The graph's output at the input size: 'b 3 H W' -> 'b k H W' (float32 on the CPU)."""
        x = np.ascontiguousarray(inputs.detach().float().cpu().numpy())
        (out,) = self.session.run([self.output_name], {self.input_name: x})
        return torch.from_numpy(out)

    def head_output(self, inputs: torch.Tensor) -> torch.Tensor:
        raise ValueError('the ONNX graph gives the output at the input size only (padding="resize" is refused)')

    def store_prediction(self, sample, output: torch.Tensor) -> None:
        self.task.store_prediction(self, sample, output)

    def __call__(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        if mode == 'tensor':
            return self.predict_tensor(inputs)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        raise ValueError(f"an ONNX task model runs mode 'tensor' or 'predict', got {mode!r}")

    def eval(self) -> OnnxTaskModel:
        return self

    def to(self, device) -> OnnxTaskModel:
        if torch.device(device).type != 'cpu':
            raise ValueError(f"ONNX models run on onnxruntime's CPU provider here; got device {device!r}: use 'cpu'")
        return self


class OnnxPredictor(Predictor):
    """:class:`heads.Predictor` for an exported ONNX file: ``OnnxPredictor(path, tile=None, overlap=64,
    threads=None)(image)`` -> a label map or a depth map at the image's size, resized first by the file's
    ``predict_scale`` (none with ``tile``), as the checkpoint's Predictor does."""

    def __init__(self, path, device: str = 'cpu', tile=None, overlap: int = 64, threads: int | None = None):
        test_cfg = None if tile is None else {'mode': 'tile', 'crop_size': tuple(tile), 'overlap': overlap}
        self.model = OnnxTaskModel(path, threads, test_cfg).to(device)
        self.kernel_policy = None
        self.device = device
        self.scale = None if tile is not None else self.model.predict_scale
