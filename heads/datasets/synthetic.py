"""SyntheticScenes: procedurally generated outdoor scenes with labels and metric depth, no files needed.

A pinhole camera at height ``CAMERA_HEIGHT`` looks at a flat ground plane: the ground at image row ``r``
below the horizon is at depth ``CAMERA_HEIGHT * focal / (r - horizon)``, clipped to ``MAX_DEPTH``. Boxes and
discs stand on the ground at random depths (one depth per object; nearer objects occlude farther ones) and
are sized in metres, so they shrink with distance. Colours come from the class, tinted per object, darkened
with depth, plus mild noise. Classes differ clearly in colour and shape, so a tiny model learns them fast.
"""
from __future__ import annotations

import numpy as np

from ..registry import DATASETS
from .base import DenseDataset

SYNTHETIC_CLASSES = ('sky', 'ground', 'box', 'disc')
SYNTHETIC_PALETTE = ((135, 185, 235), (125, 105, 80), (205, 50, 40), (235, 200, 35))
SKY, GROUND, BOX, DISC = range(4)
CAMERA_HEIGHT, MAX_DEPTH, MAX_OBJECT_DEPTH = 1.5, 20.0, 12.0  # metres


def render_scene(rng: np.random.Generator, size: tuple[int, int]) -> dict:
    """One scene of ``size`` ``(h, w)``: {'img': uint8 'h w 3' RGB, 'gt_seg_map': uint8 'h w',
    'gt_depth': float32 'h w' (metres, 0 on the sky)}."""
    h, w = size
    focal = float(w)  # px; about a 53 degree horizontal field of view
    horizon = int(rng.integers(int(0.3 * h), int(0.5 * h) + 1))
    rows = np.arange(h, dtype=np.float32)[:, None] + 0.5  # 'h 1', pixel centres
    cols = np.arange(w, dtype=np.float32)[None, :] + 0.5  # '1 w'

    ground = np.broadcast_to(rows >= horizon, (h, w))
    ground_depth = CAMERA_HEIGHT * focal / np.maximum(rows - horizon, 1e-3)  # 'h 1'
    labels = np.where(ground, GROUND, SKY).astype(np.uint8)
    depth = np.where(ground, np.minimum(ground_depth, MAX_DEPTH), 0.0).astype(np.float32)
    colour = np.empty((h, w, 3), np.float32)
    sky_gradient = 0.75 + 0.25 * np.clip(rows / max(horizon, 1), 0, 1)  # 'h 1', lighter toward the horizon
    colour[:] = np.where(ground[..., None], SYNTHETIC_PALETTE[GROUND],
                         np.asarray(SYNTHETIC_PALETTE[SKY]) * sky_gradient[..., None])

    nearest = CAMERA_HEIGHT * focal / (h - horizon) * 1.1  # an object's foot must be inside the image
    objects = [(rng.uniform(nearest, max(MAX_OBJECT_DEPTH, nearest + 1)), int(rng.integers(BOX, DISC + 1)))
               for _ in range(int(rng.integers(1, 4)))]
    for distance, kind in sorted(objects, reverse=True):  # far to near: nearer objects occlude
        foot = horizon + CAMERA_HEIGHT * focal / distance  # image row where the object meets the ground
        centre_x = rng.uniform(0.1, 0.9) * w
        if kind == BOX:
            half_w, height = rng.uniform(0.4, 1.0) * focal / distance, rng.uniform(0.8, 2.2) * focal / distance
            mask = (np.abs(cols - centre_x) <= half_w) & (rows <= foot) & (rows >= foot - height)
        else:
            radius = rng.uniform(0.4, 1.0) * focal / distance
            mask = (cols - centre_x) ** 2 + (rows - (foot - radius)) ** 2 <= radius ** 2
        tint = rng.uniform(0.85, 1.15, size=3)
        labels[mask], depth[mask] = kind, distance
        colour[mask] = np.asarray(SYNTHETIC_PALETTE[kind]) * tint

    shade = 1.0 - 0.45 * depth / MAX_DEPTH  # 'h w'; farther is darker (sky has depth 0: unshaded)
    img = colour * shade[..., None] + rng.normal(0.0, 4.0, size=(h, w, 3))
    return dict(img=np.clip(np.rint(img), 0, 255).astype(np.uint8), gt_seg_map=labels, gt_depth=depth)


@DATASETS.register_module()
class SyntheticScenes(DenseDataset):
    """``num_samples`` generated scenes of ``size`` ``(h, w)``; sample ``i`` is drawn from
    ``np.random.default_rng((seed, i))``, so it is the same on every call, process and machine.

    Each data info holds 'img' (uint8 'h w 3' RGB), 'gt_seg_map' (uint8 'h w', classes ``sky, ground, box,
    disc``), 'gt_depth' (float32 'h w', metres, sky = 0 = invalid) and 'img_path' ``synthetic://seed{seed}/{i}``.
    Scenes are rendered when fetched, so memory does not grow with ``num_samples``. Use the usual pipeline:
    LoadImage and LoadAnnotations(seg=True, depth=True) keep the in-memory arrays.
    """

    METAINFO = dict(classes=SYNTHETIC_CLASSES, palette=[list(c) for c in SYNTHETIC_PALETTE])

    def __init__(self, num_samples: int = 64, size: tuple[int, int] = (96, 128), seed: int = 0, pipeline=(),
                 **kwargs):
        if num_samples < 1 or len(size) != 2 or min(size) < 16:
            raise ValueError(f"SyntheticScenes needs num_samples >= 1 and size (h, w) >= 16 pixels, got "
                             f"num_samples={num_samples}, size={size}")
        self.num_samples, self.size, self.seed = int(num_samples), (int(size[0]), int(size[1])), int(seed)
        super().__init__(pipeline=pipeline, **kwargs)

    def load_data_list(self) -> list[dict]:
        return [dict(img_path=f'synthetic://seed{self.seed}/{i}', scene_index=i, reduce_zero_label=False,
                     seg_fields=[]) for i in range(self.num_samples)]

    def get_data_info(self, idx: int) -> dict:
        info = super().get_data_info(idx)
        rng = np.random.default_rng((self.seed, info['scene_index']))
        return {**info, **render_scene(rng, self.size)}
