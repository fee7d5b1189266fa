"""Reference values of Video Depth Anything's temporal alignment error (TAE) from the authors' own benchmark code
(``benchmark/eval/eval_tae.py``: ``eval_TAE``, which calls ``tae_torch`` per pair), so that tests/dense/test_tae.py
checks :func:`heads.evaluation.tae.temporal_alignment_error` against it without their code.

Two synthetic sequences of 5 frames at 24x32 (smooth depth with a per-frame drift, holes and pixels at and beyond
``max_depth`` in the ground truth, predictions an affine disparity of the underlying depth with per-frame scale
jitter and noise), written as their ``eval_TAE`` reads them: predictions as float32 ``.npy``, ground truths as
16-bit PNG millimetres (factor 1000), masks as 8-bit PNG; no crop (``args.a..d = None``), no resize.

- ``'motion'``: camera-to-world poses of a camera that turns (a few degrees a frame about x and y), slides and moves
  forward and back along its axis in turn: the forward moves leave holes, the backward ones make collisions
  (several source pixels on one target pixel: their splat keeps the last write), no mask.
- ``'edges'``: their special cases, with masks (the last frame's mask file absent: theirs then counts every pixel
  of it). Pairs: 0-1 a backward move (collisions); 1-2 a 100 m sideways move (no point lands in the image: their
  first ``return 0``, both ways); 2-3 a half turn about y (every point lands behind the camera, at its own pixel,
  with negative depth: their second ``return 0``, both ways); 3-4 a forward move by 2.2 m through a chequerboard of
  near (1-1.3 m) and far (2.5-3 m) blocks: the near points end behind the camera yet land in the image, mirrored,
  with negative depth, and win some collisions against far points in front (which then do not count).

Their splat ``depth_proj[valid_Y, valid_X] = valid_Z`` is an ``index_put_`` without accumulation: run serially it
writes in index order, so the last write wins; with several threads and more than a few thousand indices (about
3000 with 2 threads, torch 2.15) its chunks race, and on CUDA the order is unspecified. Here it runs on the CPU (CUDA
hidden) with one thread on 768-pixel maps: their values are deterministic.

Made with the authors' repository at commit 4f5ae23172ba60fd7bc11ef671cca678842c7072 (cv2, matplotlib, scipy, tqdm
from the project's environment), torch 2.15.0 CPU, numpy 2:

    git clone https://github.com/DepthAnything/Video-Depth-Anything /tmp/vda && git -C /tmp/vda checkout 4f5ae231
    python tests/reference_data/vda_tae_authors.py /tmp/vda
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import torch

REFERENCE = Path(__file__).with_name('vda_tae_authors.pt')
FRAMES, HEIGHT, WIDTH = 5, 24, 32
FACTOR = 1000.0  # ground truth PNG: millimetres
K = np.array([[30.0, 0.0, 15.7], [0.0, 31.0, 11.3], [0.0, 0.0, 1.0]])


def pose(angles=(0.0, 0.0, 0.0), translation=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Camera-to-world '4 4': rotation about x, then y, then z (degrees), then the translation (metres)."""
    ax, ay, az = np.radians(angles)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    out = np.eye(4)
    out[:3, :3] = rz @ ry @ rx
    out[:3, 3] = translation
    return out


def scene(rng: np.random.Generator, low: float, high: float) -> np.ndarray:
    """'n h w' smooth depth in [low, high] metres, drifting from frame to frame."""
    v, u = np.mgrid[0:HEIGHT, 0:WIDTH]
    frames = []
    for i in range(FRAMES):
        wave = np.sin(u / 5.0 + 0.3 * i + rng.uniform(0, 0.2)) * np.cos(v / 4.0 - 0.2 * i) + 0.3 * (u / WIDTH)
        frames.append(low + (high - low) * (wave - wave.min()) / (wave.max() - wave.min()))
    return np.stack(frames)


def case(rng: np.random.Generator, depth: np.ndarray, poses: list, max_depth: float, masked: bool) -> dict:
    """Inputs (ground truth with holes and far pixels; predicted disparity) of one sequence."""
    gt = depth.copy()
    gt[rng.random(gt.shape) < 0.1] = 0.0                        # holes
    gt[rng.random(gt.shape) < 0.05] = max_depth + 1.0            # beyond max_depth: not aligned on
    gt[rng.random(gt.shape) < 0.05] = max_depth                  # at max_depth: not aligned on either (strict)
    raw = np.round(gt * FACTOR).astype(np.uint16)
    scales = 1.0 + 0.05 * rng.standard_normal(FRAMES)            # per-frame scale jitter
    disparity = 3.0 * scales[:, None, None] / depth + 0.2 + 0.01 * rng.standard_normal(depth.shape)
    masks = rng.random(depth.shape) < 0.8 if masked else None
    return dict(predictions=disparity.astype(np.float32), gt_raw=raw, poses=np.stack(poses), max_depth=max_depth,
                masks=masks)


def blocks(rng: np.random.Generator) -> np.ndarray:
    """'n h w' depth of 4x4-pixel blocks, near (1-1.3 m) and far (2.5-3 m) as a chequerboard."""
    v, u = np.mgrid[0:HEIGHT, 0:WIDTH]
    wave = scene(rng, 0.0, 1.0)
    return np.where((v // 4 + u // 4) % 2 == 0, 1.0 + 0.3 * wave, 2.5 + 0.5 * wave)


def cases() -> dict:
    rng = np.random.default_rng(0)
    motion = [pose((2.0 * i, -3.0 * i, 0.5 * i), (0.04 * i, -0.02 * i, 0.25 * (i % 2))) for i in range(FRAMES)]
    edges = [pose(), pose(translation=(0, 0, -0.3)), pose(translation=(100.0, 0, -0.3)),
             pose((0, 180.0, 0), (100.0, 0, -0.3)), pose((0, 180.0, 0), (100.0, 0, -2.5))]
    return {'motion': case(rng, scene(rng, 1.0, 3.0), motion, 4.0, masked=False),
            'edges': case(rng, blocks(rng), edges, 4.0, masked=True)}


def their_tae(eval_tae, inputs: dict, folder: Path) -> float:
    """Their ``eval_TAE`` on the inputs, written to ``folder`` as their benchmark stores them."""
    folder.mkdir()
    infer, gts, masks = [], [], []
    for i in range(FRAMES):
        infer.append(str(folder / f'{i:06d}.npy'))
        np.save(infer[-1], inputs['predictions'][i])
        gts.append(str(folder / f'{i:06d}_gt.png'))
        cv2.imwrite(gts[-1], inputs['gt_raw'][i])
        masks.append(str(folder / f'{i:06d}_mask.png'))
        if inputs['masks'] is not None and i < FRAMES - 1:  # the last mask absent: theirs counts all its pixels
            cv2.imwrite(masks[-1], inputs['masks'][i].astype(np.uint8) * 255)
    args = argparse.Namespace(max_depth_eval=inputs['max_depth'], mask=inputs['masks'] is not None, hard_crop=False,
                              a=None, b=None, c=None, d=None)
    ks = [K.copy() for _ in range(FRAMES)]
    return float(eval_tae.eval_TAE(infer, gts, [FACTOR] * FRAMES, masks, ks, list(inputs['poses']), args))


def main(repo: Path) -> None:
    os.environ['CUDA_VISIBLE_DEVICES'] = ''  # their module picks CUDA when it sees one: keep the serial CPU splat
    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location('eval_tae', repo / 'benchmark' / 'eval' / 'eval_tae.py')
    eval_tae = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(eval_tae)
    assert str(eval_tae.device) == 'cpu'
    out = {'K': torch.from_numpy(K), 'factor': FACTOR, 'commit': '4f5ae23172ba60fd7bc11ef671cca678842c7072'}
    with tempfile.TemporaryDirectory() as tmp:
        for name, inputs in cases().items():
            tae = their_tae(eval_tae, inputs, Path(tmp) / name)
            masks = inputs['masks']
            if masks is not None:
                masks = masks.copy()
                masks[-1] = True
            out[name] = dict(predictions=torch.from_numpy(inputs['predictions']),
                             gt_raw=torch.from_numpy(inputs['gt_raw'].astype(np.int32)),
                             poses=torch.from_numpy(inputs['poses']), max_depth=inputs['max_depth'],
                             masks=None if masks is None else torch.from_numpy(masks), tae=tae)
            print(f'{name}: TAE {tae:.6f} %')
    torch.save(out, REFERENCE)
    print(f'wrote {REFERENCE} ({REFERENCE.stat().st_size} bytes)')


if __name__ == '__main__':
    main(Path(sys.argv[1] if len(sys.argv) > 1 else '/tmp/vda'))
