"""Turning label maps and depth maps into pictures (uint8 RGB arrays)."""
from __future__ import annotations

import cv2
import numpy as np


def default_palette(num_classes: int) -> list[list[int]]:
    """mmseg's fallback colours for classes without a palette: ``RandomState(42).randint(0, 255, (k, 3))``."""
    return np.random.RandomState(42).randint(0, 255, size=(num_classes, 3)).tolist()


def colorize_labels(labels: np.ndarray, palette, ignore_index: int = 255) -> np.ndarray:
    """'h w' class indices -> 'h w 3' RGB; ignored (and unknown) pixels are black."""
    palette = np.asarray(palette, dtype=np.uint8)
    out = np.zeros(labels.shape + (3,), dtype=np.uint8)
    known = (labels != ignore_index) & (labels >= 0) & (labels < len(palette))
    out[known] = palette[labels[known]]
    return out


def colorize_depth(depth: np.ndarray, vmin: float | None = None, vmax: float | None = None) -> np.ndarray:
    """'h w' depth -> 'h w 3' RGB with a perceptual colour map (near = bright); invalid (<= 0) pixels black."""
    valid = np.isfinite(depth) & (depth > 0)
    if not valid.any():
        return np.zeros(depth.shape + (3,), dtype=np.uint8)
    vmin = float(depth[valid].min()) if vmin is None else vmin
    vmax = float(depth[valid].max()) if vmax is None else vmax
    scaled = np.clip((depth - vmin) / max(vmax - vmin, 1e-6), 0, 1)
    colours = cv2.applyColorMap(((1 - scaled) * 255).astype(np.uint8), cv2.COLORMAP_MAGMA)
    colours = cv2.cvtColor(colours, cv2.COLOR_BGR2RGB)
    colours[~valid] = 0
    return colours


def side_by_side(rows: list[list[np.ndarray]], gap: int = 4) -> np.ndarray:
    """Panels (RGB, same height within a row) laid out in rows, on a white background."""
    lines = []
    for panels in rows:
        height = max(p.shape[0] for p in panels)
        padded = [np.pad(p, ((0, height - p.shape[0]), (0, gap), (0, 0)), constant_values=255) for p in panels]
        lines.append(np.concatenate(padded, axis=1))
    width = max(line.shape[1] for line in lines)
    lines = [np.pad(line, ((0, gap), (0, width - line.shape[1]), (0, 0)), constant_values=255) for line in lines]
    return np.concatenate(lines, axis=0)
