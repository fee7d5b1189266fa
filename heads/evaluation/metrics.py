"""Evaluation metrics for the dense-prediction tasks, as mmengine metrics (``val_evaluator`` /
``test_evaluator`` entries): :class:`IoUMetric` for semantic segmentation, :class:`DepthMetric` for
monocular depth and :class:`AccuracyMetric` for image classification.

How mmengine drives them: ``process(data_batch, data_samples)`` runs once per batch, with each sample as
the plain dict that ``BaseDataElement.to_dict()`` gives (metainfo keys such as 'img_path' at top level,
fields as nested dicts, e.g. ``sample['pred_sem_seg']['data']``); it appends exactly one entry per sample
to ``self.results`` (mmengine's distributed collection trims the gathered list to the dataset size, so
the count must match). ``evaluate(size)`` then calls ``compute_metrics(results)`` on the main process.

The metrics set ``default_prefix = ''``: the returned keys carry no prefix unless ``prefix=`` is given,
in which case they read '<prefix>/<key>'.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from ..io.labels import IGNORE_INDEX
from ..registry import METRICS


def _hw(data: torch.Tensor, name: str, sample: dict) -> torch.Tensor:
    """'1 h w' (or 'h w') -> 'h w'."""
    if data.ndim == 3 and data.shape[0] == 1:
        return data[0]
    if data.ndim != 2:
        raise ValueError(f"{name} of {sample.get('img_path', '<no img_path>')} must be '1 h w' or 'h w', "
                         f"got shape {tuple(data.shape)}")
    return data


def _check_same_size(pred: torch.Tensor, gt: torch.Tensor, sample: dict) -> None:
    if pred.shape != gt.shape:
        raise ValueError(f"prediction and ground truth of {sample.get('img_path', '<no img_path>')} differ "
                         f"in size: prediction {tuple(pred.shape)}, ground truth {tuple(gt.shape)}")


# ------------------------------------------------------------------------------------------ segmentation

@METRICS.register_module()
class IoUMetric(BaseMetric):
    """Semantic-segmentation IoU, with mmseg's definitions (``mmseg.evaluation.IoUMetric``,
    metrics ``['mIoU']``).

    Per image, over labelled pixels only (label != ``ignore_index``), the per-class areas of intersection,
    union, prediction and label are accumulated; over the whole set, with sums over images:

    - ``IoU_c = sum I_c / sum U_c``, ``Acc_c = sum I_c / sum label_area_c`` (NaN where the denominator
      is 0, i.e. the class is in neither prediction nor label, resp. not in the label);
    - ``aAcc = sum_c I_c / sum_c label_area_c`` (pixel accuracy);
    - ``mIoU`` / ``mAcc`` = nanmean over classes of IoU_c / Acc_c (NaN classes are skipped).

    This is *not* the mean of per-image IoUs: the areas are summed over the set first.

    Args:
        ignore_index: label value that marks unlabelled pixels (their prediction is not counted at all).
        num_classes: number of classes; if None, ``len(self.dataset_meta['classes'])``.
        nan_to_num: if given, NaN per-class values are replaced by it *before* the means (so such classes
            then count), as in mmseg.
        prefix: key prefix for the returned dict (keys become '<prefix>/aAcc', ...).
        collect_device: 'cpu' or 'gpu', device used to gather results across ranks.
        print_table: log a per-class table (class, IoU, Acc) through ``MMLogger.get_current_instance()``.
        collect_dir: mmengine's synchronisation directory for ``collect_device='cpu'``.

    ``evaluate`` / ``compute_metrics`` return ``{'aAcc', 'mIoU', 'mAcc'}`` as floats in percent, rounded to
    2 decimals (NaN if no class has a defined value). After it, ``self.per_class`` holds
    ``[{'class': name, 'IoU': percent, 'Acc': percent}, ...]`` (rounded to 2 decimals, NaN where undefined).

    Raises ValueError for a prediction value outside ``[0, num_classes)`` (it names the value), a label
    value outside ``[0, num_classes)`` that is not ``ignore_index``, prediction and label of different
    sizes, or no way to know the number of classes.
    """

    default_prefix = ''

    def __init__(self, ignore_index: int = IGNORE_INDEX, num_classes: Optional[int] = None,
                 nan_to_num: Optional[float] = None, prefix: Optional[str] = None,
                 collect_device: str = 'cpu', print_table: bool = True,
                 collect_dir: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix, collect_dir=collect_dir)
        self.ignore_index = ignore_index
        self.num_classes = num_classes
        self.nan_to_num = nan_to_num
        self.print_table = print_table
        self.per_class: list[dict] = []

    # -- class bookkeeping
    def _num_classes(self) -> int:
        if self.num_classes is not None:
            return int(self.num_classes)
        classes = (self.dataset_meta or {}).get('classes')
        if classes is None:
            raise ValueError("IoUMetric needs num_classes, or dataset_meta['classes'] set by the runner")
        return len(classes)

    def _class_names(self, num_classes: int) -> list[str]:
        classes = (self.dataset_meta or {}).get('classes')
        if classes is None:
            return [str(c) for c in range(num_classes)]
        if len(classes) != num_classes:
            raise ValueError(f"dataset_meta['classes'] has {len(classes)} names but num_classes is {num_classes}")
        return [str(c) for c in classes]

    # -- mmengine interface
    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Append, per sample, the int64 areas 'k' (intersect, union, pred, label) of its labelled pixels."""
        k = self._num_classes()
        for sample in data_samples:
            pred = _hw(sample['pred_sem_seg']['data'], 'pred_sem_seg', sample)            # h w
            label = _hw(sample['gt_sem_seg']['data'], 'gt_sem_seg', sample).to(pred.device)  # h w
            _check_same_size(pred, label, sample)
            self.results.append(self.intersect_and_union(pred, label, k, self.ignore_index))

    @staticmethod
    def intersect_and_union(pred: torch.Tensor, label: torch.Tensor, num_classes: int,
                            ignore_index: int = IGNORE_INDEX) -> tuple[torch.Tensor, ...]:
        """Areas of one image: pred, label '...' (same shape, integer) -> 4 int64 CPU tensors 'k':
        (intersect, union, pred_area, label_area), counted over pixels where label != ignore_index."""
        keep = label != ignore_index
        pred, label = pred[keep].long(), label[keep].long()                                 # n
        for name, values in (('prediction', pred), ('label', label)):
            bad = values[(values < 0) | (values >= num_classes)]
            if bad.numel():
                raise ValueError(f"{name} value {int(bad[0])} is outside [0, {num_classes}) "
                                 f"(num_classes={num_classes}, ignore_index={ignore_index})")
        # confusion matrix 'k k' (rows: label, cols: prediction) from one bincount
        confusion = torch.bincount(label * num_classes + pred, minlength=num_classes ** 2)
        confusion = confusion.reshape(num_classes, num_classes).cpu()
        intersect = confusion.diagonal().clone()                                          # k
        pred_area, label_area = confusion.sum(0), confusion.sum(1)                        # k, k
        return intersect, pred_area + label_area - intersect, pred_area, label_area

    def compute_metrics(self, results: list) -> dict:
        intersect, union, _, label_area = (torch.stack(r).sum(0).double() for r in zip(*results))  # k each
        nan = torch.tensor(float('nan'), dtype=torch.float64)
        iou = torch.where(union > 0, intersect / union.clamp(min=1), nan)                 # k
        acc = torch.where(label_area > 0, intersect / label_area.clamp(min=1), nan)        # k
        aacc = intersect.sum() / label_area.sum() if label_area.sum() > 0 else nan
        if self.nan_to_num is not None:
            iou, acc, aacc = (t.nan_to_num(nan=self.nan_to_num) for t in (iou, acc, aacc))

        def percent(t) -> float:
            return float(np.round(float(t) * 100, 2))

        self.per_class = [{'class': name, 'IoU': percent(i), 'Acc': percent(a)}
                          for name, i, a in zip(self._class_names(len(iou)), iou, acc)]
        if self.print_table:
            MMLogger.get_current_instance().info('per class results:\n' + self.format_table(self.per_class))
        return {'aAcc': percent(aacc), 'mIoU': percent(np.nanmean(iou.numpy()) if iou.isfinite().any() else nan),
                'mAcc': percent(np.nanmean(acc.numpy()) if acc.isfinite().any() else nan)}

    @staticmethod
    def format_table(per_class: list[dict]) -> str:
        """Plain-text table of ``per_class`` (columns Class, IoU, Acc)."""
        width = max([5] + [len(r['class']) for r in per_class])
        rule = f"+-{'-' * width}-+--------+--------+"
        lines = [rule, f"| {'Class':<{width}} |    IoU |    Acc |", rule]
        lines += [f"| {r['class']:<{width}} | {r['IoU']:6.2f} | {r['Acc']:6.2f} |" for r in per_class]
        return '\n'.join(lines + [rule])


# ------------------------------------------------------------------------------------------------- depth

def _median(x: torch.Tensor) -> torch.Tensor:
    """numpy's median of 'n' values: the middle one, or the mean of the two middle ones for an even count."""
    v = x.sort().values
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def fit_scale_shift(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Least-squares ``s, t`` minimising ``sum (s * x + t - y)**2`` over 'n' values (the 2x2 normal equations);
    a constant ``x`` (no unique fit) gets ``s = 0, t = mean(y)``."""
    n, sx, sy = x.numel(), x.sum(), y.sum()
    sxx, sxy = (x * x).sum(), (x * y).sum()
    det = n * sxx - sx * sx
    if det <= 1e-12 * max(float(n * sxx), 1e-300):
        return torch.zeros_like(sx), sy / n
    s = (n * sxy - sx * sy) / det
    return s, (sy - s * sx) / n


@METRICS.register_module()
class DepthMetric(BaseMetric):
    """Standard monocular-depth metrics (Eigen et al.; as in BTS / AdaBins / Depth Anything evaluations).

    Per image, on valid pixels only — finite ground truth with ``min_depth < gt <= max_depth``, inside
    the crop — and with the prediction clamped to ``[min_depth, max_depth]`` first:

    - ``d1``, ``d2``, ``d3``: fraction with ``max(p/g, g/p) < 1.25``, ``1.25**2``, ``1.25**3``;
    - ``abs_rel = mean |p-g|/g``, ``sq_rel = mean (p-g)**2/g``;
    - ``rmse = sqrt(mean (p-g)**2)``, ``rmse_log = sqrt(mean (log p - log g)**2)``;
    - ``log10 = mean |log10 p - log10 g|``;
    - ``silog = 100 * sqrt(mean d**2 - (mean d)**2)`` with ``d = log p - log g``.

    The reported values are the means of the per-image values over the images that have at least one
    valid pixel (each image weighs the same, whatever its number of valid pixels). Fractions (d1..d3)
    are in [0, 1], not percent; depths in the input unit (metres).

    Alignment (``alignment``), per image on its valid pixels, before the clamp and the metrics — the zero-shot
    protocols for predictions known only up to scale (and shift):

    - None: the prediction is metric depth, used as it is;
    - ``'median'``: median scaling (monodepth2 / Zhou et al.), ``p * median(g) / median(p)`` (medians of the
      valid pixels, the mean of the two middle values for an even count; a non-positive median prediction
      makes that image's metrics NaN);
    - ``'scale_shift_disparity'``: the prediction is a relative disparity (inverse depth up to scale and shift,
      what MiDaS / Depth Anything relative heads output); ``s, t`` minimise ``sum (s * p + t - 1/g)**2`` over
      the valid pixels (least squares, MiDaS / Depth Anything evaluation; a constant prediction gets ``s = 0``,
      ``t = mean(1/g)``), the aligned disparity is clamped to ``[1/max_depth, 1/min_depth]`` and the depth is
      its inverse.

    Args:
        min_depth, max_depth: valid ground-truth range (exclusive / inclusive) and prediction clamp range.
        alignment: None, 'median' or 'scale_shift_disparity' (above); e.g.
            ``--cfg-options val_evaluator.alignment=scale_shift_disparity`` (and ``test_evaluator``).
        crop: None; 'eigen' (NYU-v2: rows 45:471, cols 41:601 of 480x640, the same fractions,
            ``45*h//480 : 471*h//480`` and ``41*w//640 : 601*w//640``, for other sizes); or 'garg'
            (KITTI: rows ``int(0.40810811*h):int(0.99189189*h)``, cols ``int(0.03594771*w):int(0.96405229*w)``).
        prefix, collect_device, collect_dir: as in ``mmengine.evaluator.BaseMetric``.

    Input: ``sample['pred_depth']['data']`` and ``sample['gt_depth']['data']``, float '1 h w' of the same
    size (ValueError naming the sample's 'img_path' and both sizes otherwise). A NaN prediction on a valid
    pixel is not masked: it makes that image's metrics NaN. ``compute_metrics`` raises ValueError if no
    image has a valid ground-truth pixel.
    """

    default_prefix = ''
    METRIC_NAMES = ('d1', 'd2', 'd3', 'abs_rel', 'sq_rel', 'rmse', 'rmse_log', 'log10', 'silog')

    ALIGNMENTS = (None, 'median', 'scale_shift_disparity')

    def __init__(self, min_depth: float = 1e-3, max_depth: float = 10.0, crop: Optional[str] = None,
                 alignment: Optional[str] = None, prefix: Optional[str] = None, collect_device: str = 'cpu',
                 collect_dir: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix, collect_dir=collect_dir)
        if crop not in (None, 'eigen', 'garg'):
            raise ValueError(f"crop must be None, 'eigen' or 'garg', got {crop!r}")
        if alignment not in self.ALIGNMENTS:
            raise ValueError(f"alignment must be None, 'median' or 'scale_shift_disparity', got {alignment!r}")
        self.alignment = alignment
        if not 0 <= min_depth < max_depth:
            raise ValueError(f"need 0 <= min_depth < max_depth, got {min_depth}, {max_depth}")
        self.min_depth, self.max_depth, self.crop = float(min_depth), float(max_depth), crop

    def valid_mask(self, gt: torch.Tensor) -> torch.Tensor:
        """gt 'h w' -> bool 'h w': finite, in (min_depth, max_depth], inside the crop."""
        valid = gt.isfinite() & (gt > self.min_depth) & (gt <= self.max_depth)
        if self.crop is None:
            return valid
        h, w = gt.shape
        if self.crop == 'eigen':
            rows, cols = slice(45 * h // 480, 471 * h // 480), slice(41 * w // 640, 601 * w // 640)
        else:  # 'garg'
            rows = slice(int(0.40810811 * h), int(0.99189189 * h))
            cols = slice(int(0.03594771 * w), int(0.96405229 * w))
        inside = torch.zeros_like(valid)
        inside[rows, cols] = True
        return valid & inside

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Append, per sample, a dict of its metrics, or None if it has no valid pixel."""
        for sample in data_samples:
            pred = _hw(sample['pred_depth']['data'], 'pred_depth', sample)                # h w
            gt = _hw(sample['gt_depth']['data'], 'gt_depth', sample).to(pred.device)      # h w
            _check_same_size(pred, gt, sample)
            valid = self.valid_mask(gt)                                                   # h w
            if not valid.any():
                self.results.append(None)
                continue
            g = gt[valid].double()                                                        # n
            p = self.align(pred[valid].double(), g).clamp(self.min_depth, self.max_depth)  # n
            self.results.append(self.image_metrics(p, g))

    def align(self, p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """The prediction 'n' of one image's valid pixels aligned to its ground truth 'n' (``alignment``)."""
        if self.alignment == 'median':
            scale = _median(g) / _median(p)
            return p * scale if scale > 0 else torch.full_like(p, float('nan'))
        if self.alignment == 'scale_shift_disparity':
            s, t = fit_scale_shift(p, 1.0 / g)
            disparity = (s * p + t).clamp(1.0 / self.max_depth, 1.0 / max(self.min_depth, 1e-12))
            return 1.0 / disparity
        return p

    @staticmethod
    def image_metrics(p: torch.Tensor, g: torch.Tensor) -> dict:
        """Metrics of one image: prediction, ground truth 'n' (valid pixels, positive) -> dict of floats."""
        ratio = torch.maximum(p / g, g / p)                                               # n
        d = p.log() - g.log()                                                             # n
        out = {f'd{i}': (ratio < 1.25 ** i).double().mean() for i in (1, 2, 3)}
        out.update(abs_rel=((p - g).abs() / g).mean(), sq_rel=((p - g) ** 2 / g).mean(),
                   rmse=((p - g) ** 2).mean().sqrt(), rmse_log=(d ** 2).mean().sqrt(),
                   log10=(p.log10() - g.log10()).abs().mean(),
                   silog=100 * ((d ** 2).mean() - d.mean() ** 2).clamp(min=0).sqrt())
        return {k: float(v) for k, v in out.items()}

    def compute_metrics(self, results: list) -> dict:
        per_image = [r for r in results if r is not None]
        if not per_image:
            raise ValueError(f"DepthMetric: no valid ground-truth pixel in any of the {len(results)} images "
                             f"(valid: finite, {self.min_depth} < gt <= {self.max_depth}, crop={self.crop!r})")
        return {k: math.fsum(r[k] for r in per_image) / len(per_image) for k in self.METRIC_NAMES}


@METRICS.register_module()
class AccuracyMetric(BaseMetric):
    """Top-k accuracy (%) of image classification, ``top1``, ``top5``, ... for each k in ``topk``: a sample counts
    when its label is among the k highest ``pred_score`` entries (k above the class count: all classes)."""

    default_prefix = ''

    def __init__(self, topk: Sequence[int] = (1, 5), collect_device: str = 'cpu', prefix: Optional[str] = None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.topk = tuple(topk)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            score, label = torch.as_tensor(sample['pred_score']), int(sample['gt_label'])
            rank = int((score > score[label]).sum())  # classes scored above the true one
            self.results.append(rank)

    def compute_metrics(self, results: list) -> dict:
        ranks = np.asarray(results)
        return {f'top{k}': float(100 * np.mean(ranks < k)) for k in self.topk}
