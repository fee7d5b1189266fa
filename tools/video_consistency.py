r"""Depth models compared on one video: how much each one's depth flickers between frames, and how accurate it is.

    python tools/video_consistency.py --data-root ../shared/data/depth-7scenes \
        --model vda configs/video_depth_anything_vits_7scenes_relative_cpu.py work_dirs/vda/iter_40.pth \
        --model dav2 configs/depth_anything_v2_vits_7scenes_relative_cpu.py work_dirs/dav2/iter_40.pth

The frames are the validation set of the first model's config (its ``val_dataloader``'s frame dataset, inside a clip
wrapper if any, with ``--data-root`` as tools/train.py takes it; an RGB-D folder in list order: consecutive frames of
one video), and every model's config must list the same ones. Each model predicts them as tools/infer.py --sequence does
(heads.Predictor: a video model, Video Depth Anything, the whole sequence in its aligned windows; an image model frame
by frame), at the images' own size. Per model, one JSON line and one record of series ``video_consistency`` (settings:
the name, the config, the frame count; tools/lab/records):

- ``temporal_consistency_percent``: the mean relative change of depth between consecutive frames on photometrically
  stable pixels (heads.evaluation.temporal; a relative model's disparity read as depth ``1 / p``): lower is steadier;
- ``abs_rel``, ``d1``: accuracy against the ground truth after *one* alignment over the whole sequence
  (heads.evaluation.temporal.align_sequence: scale and shift in disparity for a relative model, one median scale for
  a metric one), over the pixels whose ground truth is valid and under ``--max-depth``, so that a steady but wrong
  depth (a constant) does not pass for a consistent one;
- with ``--poses DIR`` (7-Scenes' ``frame-NNNNNN.pose.txt``, camera-to-world) and the dataset's intrinsics:
  ``tae_percent``, Video Depth Anything's temporal alignment error (heads.evaluation.tae).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def build_parser() -> argparse.ArgumentParser:
    from lab.records.rows import EPILOG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument('--model', nargs=3, action='append', required=True, metavar=('NAME', 'CONFIG', 'CHECKPOINT'),
                        help='a depth model to compare: a name for the table, its config and its weights (repeatable)')
    parser.add_argument('--data-root', help="override every dataset's data_root, as tools/train.py does")
    parser.add_argument('--max-depth', type=float, default=10.0,
                        help='ground truth beyond this (metres) is not scored (default 10)')
    parser.add_argument('--static-threshold', type=float, default=10.0,
                        help='grey-level change (of 255) below which a pixel is static for the figure (default 10)')
    parser.add_argument('--poses', metavar='DIR', help='camera-to-world pose files <stem>.pose.txt: adds the TAE')
    return parser


def sequence_of(config: str, data_root: str | None) -> tuple[list[dict], object]:
    """(data infos of the config's validation frames, in order; the config)."""
    from heads.engine.launch import innermost_dataset, load_config
    from heads.registry import DATASETS
    cfg = load_config(config, None, None, data_root)
    dataset = DATASETS.build({**innermost_dataset(cfg.val_dataloader), 'pipeline': []})  # frames, not clips
    infos = [dataset.get_data_info(i) for i in range(len(dataset))]
    if not infos or 'depth_path' not in infos[0]:
        raise SystemExit(f"error: {config}: its validation set has no frames with ground-truth depth")
    return infos, cfg


def ground_truth(info: dict) -> np.ndarray:
    from heads.io.depth import depth_in_metres, read_raw_depth
    return depth_in_metres(read_raw_depth(info['depth_path']), info['depth_scale'], info['depth_invalid'])


def predictions(cfg, checkpoint: str, paths: list[str]) -> tuple[list[np.ndarray], bool]:
    """(each frame's prediction at its size, whether the model is relative)."""
    from heads import Predictor
    from heads.export.metadata import config_predict_scale
    cfg.predict_scale = config_predict_scale(cfg)
    predictor = Predictor(cfg, checkpoint)
    relative = bool(getattr(predictor.model, 'relative', False))
    if hasattr(predictor.model, 'predict_sequence'):
        return predictor.video(paths), relative
    return [predictor(path) for path in paths], relative


def accuracy(preds: list[np.ndarray], gts: list[np.ndarray], relative: bool, max_depth: float) -> dict:
    """AbsRel and delta1 after one alignment over the sequence (module docstring), as DepthMetric scores an image."""
    import torch

    from heads.evaluation.metrics import DepthMetric
    from heads.evaluation.temporal import align_sequence, depth_of
    scored = [np.where(gt < max_depth, gt, 0.0) for gt in gts]
    aligned = align_sequence(preds, scored, 'scale_shift_disparity' if relative else 'median')
    depth = np.concatenate([depth_of(a, relative).ravel() for a in aligned])
    gt = np.concatenate([g.ravel() for g in scored])
    mask = (gt > 0) & (depth > 0)
    metrics = DepthMetric.image_metrics(torch.from_numpy(depth[mask]), torch.from_numpy(gt[mask]))
    return {'abs_rel': metrics['abs_rel'], 'd1': metrics['d1']}


def measure(name: str, config: str, checkpoint: str, infos: list[dict], cfg, args) -> dict:
    from heads.evaluation.temporal import depth_of, temporal_consistency
    from heads.io.images import read_rgb
    paths = [info['img_path'] for info in infos]
    start = time.perf_counter()
    preds, relative = predictions(cfg, checkpoint, paths)
    wall = time.perf_counter() - start
    gts = [ground_truth(info) for info in infos]
    flicker = temporal_consistency([depth_of(p, relative) for p in preds], [read_rgb(p) for p in paths],
                                   threshold=args.static_threshold)
    row = {'model': name, 'config': config, 'frames': len(paths), 'relative': relative,
           'temporal_consistency_percent': flicker, **accuracy(preds, gts, relative, args.max_depth),
           'predict_s': wall}
    if args.poses:
        from heads.evaluation.tae import temporal_alignment_error
        from heads.io.poses import read_poses
        if 'intrinsics' not in infos[0]:
            raise SystemExit(f"error: --poses needs the camera intrinsics, and {config}'s dataset has none "
                             f"(camera-intrinsics.txt in its folder)")
        poses = read_poses([Path(p) for p in paths], args.poses)
        row['tae_percent'] = temporal_alignment_error(
            preds, gts, poses, np.asarray(infos[0]['intrinsics']), args.max_depth,
            kind='disparity' if relative else 'depth')
    return row


def main(argv=None) -> list[dict]:
    args = build_parser().parse_args(argv)
    from lab.records.rows import repo_path, row_record, tool_command
    names = [name for name, _, _ in args.model]
    if len(set(names)) != len(names):
        raise SystemExit(f"error: --model names must differ, got {names}")
    sequences = [sequence_of(config, args.data_root) for _, config, _ in args.model]  # all checked first
    first = [info['img_path'] for info in sequences[0][0]]
    for (_, config, _), (infos, _) in zip(args.model[1:], sequences[1:]):
        frames = [info['img_path'] for info in infos]
        if frames != first:
            raise SystemExit(f"error: {config} validates on other frames than {args.model[0][1]} ({len(frames)} "
                             f"against {len(first)}, or in another order): the models must see the same video")
    rows = []
    for (name, config, checkpoint), (infos, cfg) in zip(args.model, sequences):
        row = measure(name, config, checkpoint, infos, cfg, args)
        print(json.dumps(row))
        row_record('video_consistency', row, settings=['model', 'frames'], exclude=['relative'],
                   fixed={'config': repo_path(config)}, command=tool_command(__file__, argv))
        rows.append(row)
    return rows


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
