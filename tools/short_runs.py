"""The short CPU training runs on real data, each with its computed baseline, recorded in the results store.

    python tools/short_runs.py --data ../shared/data                 # every run (about 30 min on 2 cores)
    python tools/short_runs.py --data ../shared/data vit cvt 7scenes # some of them
    python tools/short_runs.py --list                                # the runs and what each trains

A run trains DPT from scratch through tools/train.py (a shrunk backbone and neck, no pretrained weights) and reads
the last validation's metrics; its baseline is computed from the same data: the majority class's mIoU on CamVid,
the training set's mean depth's AbsRel on 7-Scenes (a relative-depth run's: under its config's scale-and-shift
alignment, tools/depth_baseline.py's figure). Each run is one record of series ``short_run`` (settings: the
run's name and iterations; metrics: the validation metrics, the baseline and the wall time), so that docs/training.md's
table is rendered from the store (tools/render_docs.py). tests/training/test_training.py runs the CI ones with the
same definitions and asserts their bars: CamVid mIoU above twice the majority class's and above it + 8, 7-Scenes
AbsRel under 0.75 x the mean depth's.

--data names a folder holding ``camvid/`` and ``depth-7scenes/`` in the layout of ../shared/data (its README);
nothing is read from a default place. Checkpoints go to a temporary folder unless --work-dir names one.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ShortRun:
    """One run: the config, the options that shrink it, its length, the data folder under --data, its task."""
    config: str
    options: tuple[str, ...]
    iters: int
    data: str
    task: str  # 'camvid', 'depth' or 'relative_depth' (its baseline: tools/depth_baseline.py's, the config's alignment)
    in_ci: bool = True
    what: str = ''


# the CamVid DPT config shrunk: narrow neck, 160x120 images, batch 8 as tuned (the ViT-B recipe's 16 would accumulate
# two iterations), no workers; lr warm-up of 20 iterations then linear decay to the run's end
CAMVID = ('model.backbone.drop_path_rate=0.0', 'model.neck.hidden_channels=[32,64,128,192]',
          'model.neck.fusion_channels=64', 'model.decode_head.in_channels=64',
          'train_dataloader.dataset.pipeline.2.scale=[160,120]',
          'train_dataloader.dataset.pipeline.3.crop_size=[112,160]',
          'val_dataloader.dataset.pipeline.1.scale=[160,120]', 'train_dataloader.batch_size=8',
          'effective_batch_size=None', 'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
          'val_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False', 'optim_wrapper.optimizer.lr=1e-3',
          'param_scheduler.0.end=20', 'param_scheduler.1.begin=20')
TINY = ('model.backbone.embed_dim=192', 'model.backbone.num_heads=3')  # ViT-Ti's width
FOUR = ('model.backbone.depth=4', 'model.backbone.out_indices=[0,1,2,3]')
# EVA-02's stride-14 grid reassembled by x4 / x2 / x1 / x0.5 as Depth Anything does (strides 3.5 to 28)
STRIDE14 = ('model.backbone.out_indices=[0,1,2,3]', 'model.neck.out_strides=[3.5,7,14,28]',
            'model.data_preprocessor.size_divisor=14', 'train_dataloader.dataset.pipeline.3.crop_size=[112,154]')


def camvid(backbone: str, *options: str, iters: int, in_ci: bool = True, what: str = '') -> ShortRun:
    return ShortRun('configs/dpt_vitb_camvid.py', (*CAMVID, f'model.backbone.name={backbone}', *options), iters,
                    'camvid', 'camvid', in_ci, what)


# Iterations: about 1.5x what each took to clear the bar in a trial run (the records hold what each run reached).
RUNS = {
    'vit': camvid('vit_tiny_patch16_224', *FOUR, iters=75, what='ViT-Ti, 4 blocks'),
    'cvt': camvid('cvt_13_224', 'model.backbone.depths=[1,1,2]', 'model.backbone.out_indices=[0,1,2,2]', iters=60,
                  what='CvT-13, depths 1/1/2'),
    'coatnet': camvid('coatnet_0_rw_224', 'model.backbone.depths=[1,1,1,1]',
                      'model.backbone.embed_dims=[32,64,128,256]', 'model.backbone.stem_widths=[16,32]',
                      'model.backbone.out_indices=[1,2,3,4]', iters=60,
                      what='CoAtNet-0-rw, 1 block per stage, 1/3 widths'),
    'crossvit': camvid('crossvit_tiny_240', 'model.backbone.depths=[[1,1,0],[1,1,0]]',
                       'model.backbone.out_indices=[0,0,1,1]', iters=80, what='CrossViT-Ti, 2 multi-scale blocks'),
    'clip': camvid('vit_base_patch16_clip_quickgelu_224', *TINY, *FOUR, iters=30,
                   what='CLIP B/16 QuickGELU tower at ViT-Ti width, 4 blocks'),
    'siglip': camvid('vit_base_patch16_siglip_224', *TINY, *FOUR, iters=30,
                     what='SigLIP B/16 tower at ViT-Ti width, 4 blocks, no class token'),
    'dinov3': camvid('vit_small_patch16_dinov3', *TINY, *FOUR, iters=30,
                     what='DINOv3 S/16 at ViT-Ti width, 4 blocks, CLS + 4 registers, RoPE'),
    'eva02': camvid('eva02_tiny_patch14_224', 'model.backbone.depth=4', *STRIDE14, iters=30,
                    what="EVA-02 Ti/14, 4 blocks, strides 3.5-28, 112x154 crops"),
    'pe': camvid('vit_pe_core_tiny_patch16_384', *FOUR, iters=60, what='Perception Encoder core Ti/16, 4 blocks'),
    'aimv2': camvid('aimv2_large_patch14_224', *TINY, 'model.backbone.depth=4', *STRIDE14, iters=30,
                    what="AIMv2 L/14 at ViT-Ti width, 4 blocks, RMSNorm, no biases, EVA-02's neck and crops"),
    'radio': camvid('vit_base_patch16_radio_v3', *TINY, *FOUR, iters=30,
                    what='C-RADIOv3 B/16 at ViT-Ti width, 4 blocks, summary token + 7 registers'),
    'internvit': camvid('vit_intern300m_patch14_448', *TINY, 'model.backbone.depth=4', *STRIDE14, iters=30,
                        what="InternViT-300M at ViT-Ti width, 4 blocks, LayerScale 0.1, EVA-02's neck and crops"),
    'naflex': camvid('naflexvit_base_patch16_siglip', *TINY, *FOUR, iters=60,
                     what='NaFlex SigLIP 2 B/16 at ViT-Ti width, 4 blocks, fed a batch tensor'),
    'levit': camvid('levit_128s', 'model.backbone.out_indices=[0,0,1,2]', iters=90, in_ci=False,
                    what='LeViT-128S, full depth'),
    'pit': camvid('pit_ti_224', 'model.backbone.out_indices=[0,0,1,2]', iters=90, in_ci=False,
                  what='PiT-Ti, full depth'),
    '7scenes': ShortRun('configs/dpt_vitt4_7scenes_cpu.py', (
        'train_dataloader.dataset.pipeline.2.scale=[160,120]', 'val_dataloader.dataset.pipeline.1.scale=[160,120]',
        'predict_scale=[160,120]'), 160, 'depth-7scenes', 'depth', what='ViT-Ti, 4 blocks, 160x120'),
    'camvid_cpu': ShortRun('configs/dpt_vitt4_camvid_cpu.py', (), 400, 'camvid', 'camvid', in_ci=False,
                           what='the config as shipped: ViT-Ti, 4 blocks, 240x180'),
    '7scenes_cpu': ShortRun('configs/dpt_vitt4_7scenes_cpu.py', (), 200, 'depth-7scenes', 'depth', in_ci=False,
                            what='the config as shipped: ViT-Ti, 4 blocks, 320x240'),
    'vda': ShortRun('configs/video_depth_anything_vits_7scenes_relative_cpu.py', (), 40, 'depth-7scenes',
                    'relative_depth', in_ci=False,
                    what='Video Depth Anything as shipped: ViT-S, clips of 4 frames x 2, 168x126, VideoDepthLoss'),
    'dav2_relative': ShortRun('configs/depth_anything_v2_vits_7scenes_relative_cpu.py', (), 40, 'depth-7scenes',
                              'relative_depth', in_ci=False,
                              what="Depth Anything V2 relative as shipped: ViT-S, 8 frames, 168x126 (vda's budget)"),
}


def train_argv(run: ShortRun, work_dir: Path, data_root: Path) -> list[str]:
    """tools/train.py's arguments for ``run``: its options, then the schedule set to its length with one validation
    at its end (a backbone's own crop or padding, last in ``run.options``, wins over the shared ones before it)."""
    length = (f'train_cfg.max_iters={run.iters}', f'train_cfg.val_interval={run.iters}',
              f'param_scheduler.1.end={run.iters}', f'default_hooks.checkpoint.interval={run.iters}')
    return [run.config, '--work-dir', str(work_dir), '--data-root', str(data_root), '--cfg-options', *run.options,
            *length]


def camvid_baseline(root: Path) -> float:
    """mIoU (mmseg's definition) of predicting the training set's most frequent class everywhere on val."""
    import cv2
    import numpy as np
    read = lambda split: [np.where(m == 11, 255, m) for m in (  # noqa: E731 (class 11 'void' is ignored)
        cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted((root / 'annotations' / split).glob('*.png')))]
    counts = np.bincount(np.concatenate([t[t != 255] for t in read('train')]), minlength=11)
    majority = counts.argmax()
    label = np.concatenate([v[v != 255] for v in read('val')])
    inter = np.bincount(label[label == majority], minlength=11).astype(float)
    union = np.bincount(label, minlength=11).astype(float)
    union[majority] += label.size - inter[majority]
    return float(100 * np.nanmean(np.where(union > 0, inter / np.where(union > 0, union, 1), np.nan)))


def depth_baseline(root: Path) -> float:
    """AbsRel on val of predicting the training set's mean depth everywhere (7-Scenes: uint16 mm, 0 / 65535 invalid)."""
    import cv2
    import numpy as np
    read = lambda split: [cv2.imread(str(root / 'depth' / f'{stem}.png'), cv2.IMREAD_UNCHANGED).astype(np.float64)  # noqa: E731
                          for stem in (root / f'{split}.txt').read_text().split()]
    valid = lambda d: d[(d > 0) & (d < 65535)] / 1000  # noqa: E731
    mean = np.mean(np.concatenate([valid(d) for d in read('train')]))
    return float(np.mean([np.mean(np.abs(mean - valid(d)) / valid(d)) for d in read('val')]))


def relative_depth_baseline(run: ShortRun, root: Path) -> float:
    """AbsRel on val of the training mean depth under the run's config's DepthMetric (its alignment: a per-image
    constant fitted to the ground truth), computed as tools/depth_baseline.py computes it."""
    import depth_baseline as baseline_tool

    from heads.engine.launch import load_config
    args = baseline_tool.build_parser().parse_args(
        [run.config, '--data-root', str(root), *(['--cfg-options', *run.options] if run.options else [])])
    cfg = load_config(ROOT / run.config, args.cfg_options, None, args.data_root)
    return baseline_tool.baseline(cfg, run.config)['metrics']['abs_rel']


def last_validation(work_dir: Path, task: str) -> dict:
    """The metrics of the run's last validation, from the Runner's scalars.json."""
    key = 'mIoU' if task == 'camvid' else 'abs_rel'
    (log,) = work_dir.glob('*/vis_data/scalars.json')
    lines = [json.loads(line) for line in log.read_text().splitlines() if key in line]
    wanted = ('mIoU', 'aAcc') if task == 'camvid' else ('abs_rel', 'd1', 'rmse')
    return {k: round(float(lines[-1][k]), 4) for k in wanted if k in lines[-1]}


def run(name: str, data: Path, work_dir: Path, *, record: bool = True) -> dict:
    """Train run ``name`` on ``data`` (the folder holding camvid/ and depth-7scenes/) in ``work_dir``; its metrics,
    baseline and wall time, recorded as one record of series short_run unless ``record`` is False."""
    import train as train_tool
    spec = RUNS[name]
    root = data / spec.data
    baseline = {'camvid': camvid_baseline, 'depth': depth_baseline}.get(spec.task)
    baseline = baseline(root) if baseline else relative_depth_baseline(spec, root)
    start = time.perf_counter()
    train_tool.main(train_argv(spec, work_dir, root))
    metrics = {**last_validation(work_dir, spec.task), 'baseline': round(baseline, 4),
               'wall_s': round(time.perf_counter() - start, 1)}
    if record:
        from lab.records import store
        store.record('short_run', settings={'run': name, 'iters': spec.iters}, metrics=metrics,
                     command=f'python tools/short_runs.py --data DATA {name}',
                     threads=int(os.environ.get('OMP_NUM_THREADS', 0)) or os.cpu_count())
    return metrics


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('runs', nargs='*', metavar='RUN', help=f"runs to train (default: all): {', '.join(RUNS)}")
    parser.add_argument('--data', type=Path, help='folder holding camvid/ and depth-7scenes/ (as ../shared/data)')
    parser.add_argument('--work-dir', type=Path, help='keep each run in WORK_DIR/<run> (default: a temporary folder)')
    parser.add_argument('--list', action='store_true', help='print the runs and exit')
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        for name, spec in RUNS.items():
            print(f"{name:12s} {spec.iters:4d} iter  {spec.config}  {spec.what}{'' if spec.in_ci else '  (not in CI)'}")
        return 0
    unknown = [n for n in args.runs if n not in RUNS]
    if unknown:
        parser.error(f"unknown run(s) {', '.join(unknown)}; the runs are: {', '.join(RUNS)}")
    if args.data is None:
        parser.error('--data DIR is required: the folder holding camvid/ and depth-7scenes/ (as ../shared/data)')
    missing = sorted({RUNS[n].data for n in args.runs or RUNS if not (args.data / RUNS[n].data).is_dir()})
    if missing:
        parser.error(f"--data {args.data}: no folder {', '.join(missing)} in it (see ../shared/data's README)")
    for name in args.runs or RUNS:
        with tempfile.TemporaryDirectory(prefix=f'short_run_{name}_') as scratch:
            work_dir = args.work_dir / name if args.work_dir else Path(scratch)
            print(f'{name}: {run(name, args.data, work_dir)}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(run_main(main))
