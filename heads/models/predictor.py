"""``Predictor``: a trained config + checkpoint as a function from an image to a label map (or a panoptic map) or a
depth map."""
from __future__ import annotations

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.structures import BaseDataElement

from zoo.runtime import apply_kernel_policy

from ..io.images import check_rgb, keep_ratio_size, read_rgb
from ..registry import MODELS
from .inference_mode import tiled_cfg
from .task_checkpoint import load_task_checkpoint, without_backbone_weights


class Predictor:
    """``Predictor(config, checkpoint=None, device='cpu')(image)``.

    config: a config file, a ``Config`` or a dict with a ``model`` entry; checkpoint: one written by training here
    or an mmseg DPT checkpoint (:mod:`heads.layouts.mmseg`), refused when a weight is NaN or infinite; optional
    ``predict_scale`` (e.g. (2048, 512)) resizes the image keeping its aspect ratio before inference, as the test
    pipeline does. ``tile`` (height, width) with ``overlap`` (pixels) predicts at the image's own size, any size, in
    overlapping tiles (test_cfg mode='tile', :mod:`.tiling`; ``predict_scale`` is then not applied): the model's
    memory is that of one tile. A video model (:class:`~heads.models.video_depth_anything.VideoDepthEstimator`) sees
    the image as a clip of one frame.
    image: a path or an RGB uint8 'h w 3' array. Returns an int64 label map (segmentation), the int64 packed
    panoptic map (``label + instance * INSTANCE_OFFSET``) of a mask-classification model whose ``test_cfg`` asks for
    panoptic results only, or a float32 depth map (metres for a metric head, relative inverse depth for a relative
    one), 'h w' at the image's size.
    """

    def __init__(self, config, checkpoint=None, device: str = 'cpu', tile=None, overlap: int = 64):
        cfg = config if isinstance(config, Config) else (
            Config(config) if isinstance(config, dict) else Config.fromfile(str(config)))
        model_cfg = cfg.model if checkpoint is None else without_backbone_weights(cfg.model)
        if tile is not None:
            model_cfg = {**model_cfg, 'test_cfg': tiled_cfg(model_cfg.get('test_cfg'), tile, overlap)}
        self.model = MODELS.build(model_cfg)
        if checkpoint is not None:
            load_task_checkpoint(self.model, checkpoint, finite=True)  # this project's layout or mmseg's
        self.model.to(device).eval()
        self.kernel_policy = apply_kernel_policy(self.model)  # this machine's CPU kernels (zoo.runtime)
        self.device = device
        self.scale = None if tile is not None else cfg.get('predict_scale')

    @torch.no_grad()
    def __call__(self, image) -> np.ndarray:
        batch = self.batch([image])
        batch['data_samples'][0].set_metainfo({'clip_frames': 1})  # a video model: a one-frame clip
        data = self.model.data_preprocessor(batch, training=False)
        return self.result(self.model(data['inputs'], data['data_samples'], mode='predict')[0])

    @torch.no_grad()
    def video(self, frames) -> list[np.ndarray]:
        """Depth of a video's ``frames`` (paths or RGB uint8 'h w 3' arrays, in order, all one size), predicted
        together by a video model (``predict_sequence``: overlapping windows of clips aligned to each other); one
        float32 'h w' map per frame. All the frames are held in memory at the model's input size."""
        if not hasattr(self.model, 'predict_sequence'):
            raise TypeError(f"this model ({type(self.model).__name__}) predicts images one at a time: call the "
                            f"Predictor on each frame, or use a video model (e.g. VideoDepthEstimator)")
        data = self.model.data_preprocessor(self.batch(frames, one_size=True), training=False)
        return [self.result(sample) for sample in self.model.predict_sequence(data['inputs'], data['data_samples'])]

    def batch(self, images, one_size: bool = False) -> dict:
        """The data_preprocessor's input for ``images`` (paths or RGB arrays), each resized by ``predict_scale``;
        ``one_size``: refuse images of different sizes (a video's frames), naming the first that differs."""
        inputs, samples = [], []
        for index, image in enumerate(images):
            name = image if not isinstance(image, np.ndarray) else f'frame {index}'
            image = read_rgb(image) if not isinstance(image, np.ndarray) else check_rgb(image)
            original = image.shape[:2]
            if one_size and samples and original != samples[0].metainfo['ori_shape']:
                raise ValueError(f"{name} is {original[0]}x{original[1]}, but the video's first frame is "
                                 f"{samples[0].metainfo['ori_shape'][0]}x{samples[0].metainfo['ori_shape'][1]}: the "
                                 f"frames of one video must all have one size")
            if self.scale:
                h, w = keep_ratio_size(*original, self.scale)
                image = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
            samples.append(BaseDataElement(metainfo={'ori_shape': original}))
            inputs.append(torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))))
        if not inputs:
            raise ValueError('no image to predict')
        return {'inputs': inputs, 'data_samples': samples}

    @staticmethod
    def result(sample) -> np.ndarray:
        """The label map, panoptic map or depth map a predicted sample holds, as a numpy array."""
        if 'pred_sem_seg' in sample:
            return sample.pred_sem_seg.data[0].cpu().numpy()
        if 'pred_panoptic_seg' in sample:
            return sample.pred_panoptic_seg.data[0].cpu().numpy()
        return sample.pred_depth.data[0].float().cpu().numpy()
