"""A hook that draws predictions next to the ground truth during validation and testing."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from mmengine.hooks import Hook
from mmengine.runner import BaseLoop

from ..io.images import write_rgb
from ..io.labels import IGNORE_INDEX
from ..io.palettes import default_palette
from ..registry import HOOKS
from .draw import caption, colorize_depth, colorize_labels, draw_boxes, legend, side_by_side


@HOOKS.register_module()
class PredictionVisualizationHook(Hook):
    """Rows of [image | ground truth | prediction] for the first ``max_images`` validation images (label maps, depth,
    or boxes: detections scoring at least ``score_thr``), written to
    ``work_dir/<grid_file>`` after each validation and given to the visualizer's backends (TensorBoard: images
    tab, one per validation step); with ``show_dir`` every test image is written there too. The columns are
    titled, and segmentation pictures carry a legend of the classes they show, in the dataset's colours.
    """

    def __init__(self, grid_file: str = 'predictions.png', max_images: int = 4, show_dir: str | None = None,
                 score_thr: float = 0.3):
        self.grid_file, self.max_images, self.show_dir = grid_file, max_images, show_dir
        self.score_thr = score_thr  # detections drawn
        self._rows: list[list[np.ndarray]] = []
        self._shown: set[int] = set()
        self._kind: str | None = None  # 'segmentation', 'depth' or 'detection', from the model's outputs

    def before_val_epoch(self, runner) -> None:
        self._rows, self._shown = [], set()

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        for image, sample in zip(data_batch['inputs'], outputs):
            if len(self._rows) < self.max_images:
                self._rows.append(self._panels(runner, image, sample))
                self._shown |= self._classes_shown(sample)

    def after_val_epoch(self, runner, metrics=None) -> None:
        if self._rows:
            grid = self._picture(runner, self._rows, self._shown, self._column_titles(self._kind))
            path = write_rgb(Path(runner.work_dir) / self.grid_file, grid)
            runner.visualizer.add_image('val_predictions', grid, step=runner.iter)  # TensorBoard's images tab
            runner.logger.info(f"predictions next to ground truth: {path}")

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if not self.show_dir:
            return
        for image, sample in zip(data_batch['inputs'], outputs):
            name = Path(str(sample.metainfo.get('img_path', f'{batch_idx}'))).stem + '.png'
            panels = self._panels(runner, image, sample)
            picture = self._picture(runner, [panels], self._classes_shown(sample), self._column_titles(self._kind))
            write_rgb(Path(self.show_dir) / name, picture)

    def _picture(self, runner, rows: list[list[np.ndarray]], shown: set[int], titles: list[str]) -> np.ndarray:
        """The rows under titled columns, with a legend of the ``shown`` classes on the right (segmentation)."""
        first = [caption(panel, title) for panel, title in zip(rows[0], titles)]
        first += rows[0][len(first):]
        grid = side_by_side([first, *rows[1:]])
        if self._kind != 'segmentation' or not shown:
            return grid
        meta = self._meta(runner)
        classes = list(meta.get('classes') or ())
        palette = self._palette(runner, max(shown) + 1)
        ids = sorted(shown)
        names = [classes[i] if i < len(classes) else f'class {i}' for i in ids]
        return np.concatenate([grid, legend(names, [palette[i] for i in ids], grid.shape[0])], axis=1)

    @staticmethod
    def _column_titles(kind: str | None) -> list[str]:
        if kind == 'detection':
            return ['image', 'ground truth', 'detections']
        if kind == 'depth':
            return ['image', 'ground-truth depth', 'predicted depth']
        return ['image', 'ground truth', 'prediction']

    def _classes_shown(self, sample) -> set[int]:
        """Class ids in the sample's ground truth and prediction (segmentation; ignored pixels left out)."""
        if 'pred_sem_seg' not in sample:
            return set()
        maps = [sample.pred_sem_seg.data] + ([sample.gt_sem_seg.data] if 'gt_sem_seg' in sample else [])
        return {int(c) for m in maps for c in m.unique().tolist() if int(c) != IGNORE_INDEX}

    def _panels(self, runner, image, sample) -> list[np.ndarray]:
        rgb = np.ascontiguousarray(image.cpu().numpy().transpose(1, 2, 0))
        self._kind = 'detection' if 'boxes' in sample else 'segmentation' if 'pred_sem_seg' in sample else 'depth'
        if 'boxes' in sample:  # detection: ground truth and detections scoring at least score_thr, boxes drawn
            return self._box_panels(runner, rgb, sample)
        if 'pred_sem_seg' in sample:
            pred = sample.pred_sem_seg.data[0].cpu().numpy()
            gt = sample.gt_sem_seg.data[0].cpu().numpy() if 'gt_sem_seg' in sample else None
            palette = self._palette(runner, int(pred.max()) + 1)
            draw = lambda labels: colorize_labels(labels, palette)  # noqa: E731
        else:
            pred = sample.pred_depth.data[0].float().cpu().numpy()
            gt = sample.gt_depth.data[0].float().cpu().numpy() if 'gt_depth' in sample else None
            valid = gt[gt > 0] if gt is not None else pred
            vmin, vmax = float(valid.min()), float(valid.max())
            draw = lambda depth: colorize_depth(depth, vmin, vmax)  # noqa: E731
        h, w = pred.shape
        rgb = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_LINEAR) if rgb.shape[:2] != (h, w) else rgb
        return [rgb] + ([draw(gt)] if gt is not None else []) + [draw(pred)]

    def _box_panels(self, runner, rgb: np.ndarray, sample) -> list[np.ndarray]:
        names = ['background', *self._meta(runner).get('classes', ())]  # torchvision labels: 0 = background
        palette = self._palette(runner, len(names) + 1)
        keep = sample.scores >= self.score_thr
        panels = [draw_boxes(rgb, sample.boxes[keep].cpu(), sample.labels[keep].tolist(), names, palette,
                             sample.scores[keep].tolist())]
        if 'gt_boxes' in sample:
            panels.insert(0, draw_boxes(rgb, sample.gt_boxes.cpu(), sample.gt_labels.tolist(), names, palette))
        return [rgb, *panels]

    @staticmethod
    def _meta(runner) -> dict:
        """The dataset meta (classes, palette) of the running test or validation loop's evaluator."""
        loops = (getattr(runner, name, None) for name in ('_test_loop', '_val_loop'))
        return next((loop.evaluator.dataset_meta for loop in loops
                     if isinstance(loop, BaseLoop) and getattr(loop.evaluator, 'dataset_meta', None)), {})

    @classmethod
    def _palette(cls, runner, needed: int) -> np.ndarray:
        meta = cls._meta(runner)
        palette = meta.get('palette')
        if palette is None or len(palette) < needed:
            palette = default_palette(max(needed, len(meta.get('classes', ())), 1))
        return np.asarray(palette, dtype=np.uint8)
