"""The mean-depth predictor: the bar a depth model must clear. The training set's mean depth (over every valid pixel
of every training frame) predicted at every pixel of every validation frame, scored by a :class:`DepthMetric` as
the model's predictions are, with the metric's alignment. Under ``alignment='scale_shift_disparity'`` a constant
gets ``s = 0, t = mean(1/g)``: it becomes each image's harmonic-mean depth, a per-image constant fitted to the
ground truth (with ``'median'``, each image's median depth), a stronger bar than the training mean itself."""
from __future__ import annotations

import math

import torch

from ..transforms import LoadAnnotations
from .metrics import DepthMetric


def depth_maps(dataset):
    """Each frame's depth map in metres ('h w' float32 tensor, 0 = invalid) and its data info, as the model's
    pipeline loads them (:class:`~heads.transforms.LoadAnnotations`: depth scale, invalid values, masks)."""
    load = LoadAnnotations(seg=False, depth=True)
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        yield torch.from_numpy(load(dict(info))['gt_depth']), info


def training_mean_depth(train_set, metric: DepthMetric) -> float:
    """The mean of the training frames' depth over their pixels valid for ``metric`` (finite, in
    ``(min_depth, max_depth]``, inside its crop), every pixel weighing the same."""
    total, count = [], 0
    for depth, _ in depth_maps(train_set):
        valid = metric.valid_mask(depth)
        total.append(float(depth[valid].double().sum()))
        count += int(valid.sum())
    if count == 0:
        raise ValueError(f"no valid depth pixel in the {len(train_set)} training frames "
                         f"({metric.min_depth} < depth <= {metric.max_depth}); check depth_scale and depth_invalid")
    return math.fsum(total) / count


def mean_depth_baseline(train_set, val_set, metric: DepthMetric) -> tuple[float, dict]:
    """(training-set mean depth in metres, ``metric``'s figures for it predicted everywhere on ``val_set``).
    ``train_set``, ``val_set``: datasets with ``len`` and ``get_data_info`` (e.g.
    :class:`~heads.datasets.RGBDFolderDataset`); ``metric`` is reset first."""
    mean = training_mean_depth(train_set, metric)
    metric.results.clear()
    for depth, info in depth_maps(val_set):
        metric.process([], [dict(pred_depth=dict(data=torch.full_like(depth, mean)[None]),
                                 gt_depth=dict(data=depth[None]), img_path=info.get('img_path'))])
    return mean, metric.compute_metrics(metric.results)
