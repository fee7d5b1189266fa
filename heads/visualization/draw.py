"""Turning label maps, depth maps and attention weights into pictures (uint8 RGB arrays): colours, overlays,
legends, colour bars, captions and panel layouts."""
from __future__ import annotations

import cv2
import numpy as np

from ..io.labels import IGNORE_INDEX, INSTANCE_OFFSET


def colorize_labels(labels: np.ndarray, palette, ignore_index: int = IGNORE_INDEX) -> np.ndarray:
    """'h w' class indices -> 'h w 3' RGB; ignored (and unknown) pixels are black."""
    palette = np.asarray(palette, dtype=np.uint8)
    out = np.zeros(labels.shape + (3,), dtype=np.uint8)
    known = (labels != ignore_index) & (labels >= 0) & (labels < len(palette))
    out[known] = palette[labels[known]]
    return out


def colorize_panoptic(panoptic: np.ndarray, palette, num_classes: int) -> np.ndarray:
    """'h w' packed panoptic map (``label + instance * INSTANCE_OFFSET``, ``num_classes`` = none) -> 'h w 3' RGB:
    each segment in its class's colour, the instances of a class after the first shifted by a fixed offset of their
    own (any number of them), segment borders dark; no segment (and a class beyond the palette) black."""
    panoptic = np.asarray(panoptic, dtype=np.int64)
    palette = np.asarray(palette, dtype=np.int64)
    out = np.zeros(panoptic.shape + (3,), dtype=np.uint8)
    for value in np.unique(panoptic):
        label, instance = int(value % INSTANCE_OFFSET), int(value // INSTANCE_OFFSET)
        if value < 0 or value == num_classes or label >= len(palette):
            continue
        colour = palette[label]
        if instance:
            colour = colour + np.random.RandomState(instance).randint(-60, 61, 3)
        out[panoptic == value] = np.clip(colour, 0, 255).astype(np.uint8)
    border = np.zeros(panoptic.shape, dtype=bool)
    border[:-1] |= panoptic[:-1] != panoptic[1:]
    border[:, :-1] |= panoptic[:, :-1] != panoptic[:, 1:]
    out[border] //= 3
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


def overlay(image: np.ndarray, colours: np.ndarray, alpha: float = 0.5, mask: np.ndarray | None = None) -> np.ndarray:
    """``image`` blended with ``colours`` (both 'h w 3' uint8 RGB) by ``alpha``; where ``mask`` is False the image
    is kept as it is."""
    blended = (image.astype(np.float32) * (1 - alpha) + colours.astype(np.float32) * alpha).round().astype(np.uint8)
    return blended if mask is None else np.where(mask[..., None], blended, image)


def heatmap(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """'h w' non-negative values (e.g. attention weights) scaled by their maximum, resized bilinearly to ``size``
    (h, w) and coloured with the 'jet' map (high = red): 'H W 3' uint8 RGB."""
    scaled = values.astype(np.float32) / max(float(values.max()), 1e-12)
    scaled = cv2.resize(scaled, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    colours = cv2.applyColorMap((np.clip(scaled, 0, 1) * 255).astype(np.uint8), cv2.COLORMAP_JET)
    return cv2.cvtColor(colours, cv2.COLOR_BGR2RGB)


def caption(panel: np.ndarray, text: str, height: int = 18) -> np.ndarray:
    """``panel`` with a white strip above it holding ``text``."""
    strip = np.full((height, panel.shape[1], 3), 255, np.uint8)
    cv2.putText(strip, text, (2, height - 5), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    return np.concatenate([strip, panel], axis=0)


def draw_boxes(image: np.ndarray, boxes, labels, names, palette, scores=None) -> np.ndarray:
    """A copy of 'h w 3' ``image`` with xyxy ``boxes`` outlined in their label's palette colour and captioned with
    the class name (``names[label]``) and, when given, the score."""
    out = np.ascontiguousarray(image).copy()
    for i, (box, label) in enumerate(zip(np.asarray(boxes).round().astype(int), labels)):
        colour = tuple(int(c) for c in palette[int(label) % len(palette)])
        x0, y0, x1, y1 = box
        cv2.rectangle(out, (x0, y0), (x1, y1), colour, 1)
        text = names[int(label)] if int(label) < len(names) else str(int(label))
        text += f' {float(scores[i]):.2f}' if scores is not None else ''
        cv2.putText(out, text, (x0, max(y0 - 3, 8)), cv2.FONT_HERSHEY_SIMPLEX, 0.35, colour, 1, cv2.LINE_AA)
    return out


def legend(names, palette, height: int, row: int = 18, width: int = 150) -> np.ndarray:
    """A white 'height x width' panel listing ``names`` next to their palette colours (one per ``row`` pixels;
    columns are added when they do not fit)."""
    per_column = max((height - 4) // row, 1)
    columns = -(-len(names) // per_column) if names else 1
    panel = np.full((height, width * columns, 3), 255, np.uint8)
    for i, (name, colour) in enumerate(zip(names, palette)):
        x, y = (i // per_column) * width + 4, (i % per_column) * row + 4
        cv2.rectangle(panel, (x, y), (x + row - 6, y + row - 6), tuple(int(c) for c in colour), -1)
        cv2.putText(panel, str(name), (x + row, y + row - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1,
                    cv2.LINE_AA)
    return panel


def colour_bar(vmin: float, vmax: float, height: int, unit: str = 'm', width: int = 70, ticks: int = 5) -> np.ndarray:
    """A vertical bar of :func:`colorize_depth`'s colours from ``vmin`` (top) to ``vmax`` (bottom) with labelled
    ticks, 'height x width' RGB."""
    ramp = np.linspace(vmin, vmax, height, dtype=np.float32)[:, None].repeat(16, axis=1)
    bar = colorize_depth(np.maximum(ramp, 1e-6), vmin, vmax)
    panel = np.full((height, width, 3), 255, np.uint8)
    panel[:, :16] = bar
    for value in np.linspace(vmin, vmax, ticks):
        y = int(round((value - vmin) / max(vmax - vmin, 1e-12) * (height - 1)))
        cv2.line(panel, (16, y), (20, y), (0, 0, 0), 1)
        cv2.putText(panel, f'{value:.2f} {unit}', (22, min(max(y + 4, 10), height - 2)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.35, (0, 0, 0), 1, cv2.LINE_AA)
    return panel
