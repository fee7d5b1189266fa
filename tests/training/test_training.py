"""Training and evaluation through mmengine Runners and the tools: wiring, resume, autocast, learning."""
import contextlib
import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from ..reference import shared_data

ROOT = Path(__file__).resolve().parents[2]
import test as test_tool  # noqa: E402
import train as train_tool  # noqa: E402

pytestmark = pytest.mark.slow  # every test here trains (the fast lane: -m "not slow")


def quick(tmp_path, iters, *extra):
    """The quickstart config, shortened."""
    return ['configs/quickstart.py', '--work-dir', str(tmp_path), '--cfg-options', f'train_cfg.max_iters={iters}',
            f'train_cfg.val_interval={iters}', 'default_hooks.checkpoint.interval=2',
            'default_hooks.logger.interval=1', 'train_dataloader.dataset.num_samples=16',
            'val_dataloader.dataset.num_samples=8', *extra]


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_quickstart_trains_evaluates_and_draws(tmp_path, monkeypatch):
    """... and the finished run is recorded (series train): its config, options, length, final validation metrics
    and wall time."""
    from ..tools.records import own_store, series_records
    folder = own_store(monkeypatch, tmp_path / 'store')
    start = time.perf_counter()
    runner = train_tool.main(quick(tmp_path, 4))
    seconds = time.perf_counter() - start
    scalars = runner.message_hub.log_scalars
    assert 'val/mIoU' in scalars or 'mIoU' in ' '.join(scalars)
    assert (tmp_path / 'predictions.png').stat().st_size > 0
    assert (tmp_path / 'iter_4.pth').exists()
    (entry,) = series_records(folder, 'train')
    options = dict(option.split('=') for option in quick(tmp_path, 4)[4:])
    assert entry['settings'] == {'config': 'configs/quickstart.py', 'max_iters': 4,
                                 'cfg_options': {k: int(v) for k, v in options.items()}}
    logged = scalars[next(k for k in scalars if k.endswith('mIoU'))].current()
    assert entry['metrics']['mIoU'] == pytest.approx(logged) and 'aAcc' in entry['metrics']
    assert 0 < entry['metrics']['wall_s'] <= seconds and entry['rounds'] == {}
    assert entry['command'] == 'python tools/train.py ' + ' '.join(quick(tmp_path, 4))


def test_resume_reads_checkpoints_with_weights_only_loading(tmp_path):
    train_tool.main(quick(tmp_path, 4))
    checkpoint = torch.load(tmp_path / 'iter_4.pth', weights_only=True)  # what torch >= 2.6 does by default
    assert checkpoint['meta']['iter'] == 4 and 'message_hub' in checkpoint
    (tmp_path / 'iter_4.pth').unlink()  # resume from the checkpoint at iteration 2
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'iter_2.pth'))
    runner = train_tool.main(quick(tmp_path, 6, 'default_hooks.checkpoint.interval=2') + ['--resume'])
    assert runner.iter == 6
    loss_history = runner.message_hub.get_scalar('train/loss').data[0]
    assert len(loss_history) == 6  # the two iterations before the checkpoint were restored with it


def test_test_tool_prints_the_results_once_from_a_checkpoint(tmp_path, capsys):
    train_tool.main(quick(tmp_path, 2))
    capsys.readouterr()
    metrics = test_tool.main(['configs/quickstart.py', str(tmp_path / 'iter_2.pth'), '--work-dir', str(tmp_path),
                              '--tta', '--show-dir', str(tmp_path / 'show'), '--out', str(tmp_path / 'metrics.json'),
                              '--cfg-options', 'test_dataloader.dataset.num_samples=4'])
    printed = capsys.readouterr().out
    assert f"mIoU: {metrics['mIoU']:.4f}" in printed and printed.count('| sky ') == 1
    assert 'Config:' not in printed and 'WARNING' not in printed and len(printed.splitlines()) < 20, printed
    saved = json.loads((tmp_path / 'metrics.json').read_text())
    assert saved['mIoU'] == metrics['mIoU'] and [row['class'] for row in saved['per_class']][0] == 'sky'
    assert len(list((tmp_path / 'show').glob('*.png'))) == 4


def test_amp_trains_in_bf16_autocast_on_cpu(tmp_path):
    from zoo.runtime import cpu_has_bf16_kernels
    slow = not cpu_has_bf16_kernels()  # then the user is told that bf16 runs slower than fp32 on this CPU
    with pytest.warns(UserWarning, match='no oneDNN bf16 kernels') if slow else contextlib.nullcontext():
        runner = train_tool.main(quick(tmp_path, 2) + ['--amp'])
    assert type(runner.optim_wrapper).__name__ == 'AutocastOptimWrapper'
    assert np.isfinite(runner.message_hub.get_scalar('train/loss').current())
    assert next(runner.model.parameters()).dtype == torch.float32


def majority_class_miou(train_labels, val_labels, num_classes, ignore=255):
    """mIoU (mmseg definitions) of predicting the training set's most frequent class everywhere."""
    counts = np.bincount(np.concatenate([t[t != ignore] for t in train_labels]), minlength=num_classes)
    majority = counts.argmax()
    label = np.concatenate([v[v != ignore] for v in val_labels])
    inter = np.bincount(label[label == majority], minlength=num_classes).astype(float)
    area_label = np.bincount(label, minlength=num_classes).astype(float)
    area_pred = np.zeros(num_classes)
    area_pred[majority] = label.size
    union = area_label + area_pred - inter
    return 100 * np.nanmean(np.where(union > 0, inter / np.where(union > 0, union, 1), np.nan))


TINY_VIT = ['model.backbone.name=vit_tiny_patch16_224', 'model.backbone.depth=4',
            'model.backbone.out_indices=[0,1,2,3]']
SMALL_CVT = ['model.backbone.name=cvt_13_224', 'model.backbone.depths=[1,1,2]', 'model.backbone.out_indices=[0,1,2,2]']
SMALL_COATNET = ['model.backbone.name=coatnet_0_rw_224', 'model.backbone.depths=[1,1,1,1]',
                 'model.backbone.embed_dims=[32,64,128,256]', 'model.backbone.stem_widths=[16,32]',
                 'model.backbone.out_indices=[1,2,3,4]']
SMALL_CROSSVIT = ['model.backbone.name=crossvit_tiny_240', 'model.backbone.depths=[[1,1,0],[1,1,0]]',
                  'model.backbone.out_indices=[0,0,1,1]']
# a CLIP tower (pre_norm, no patch bias, LayerNorm eps 1e-5, QuickGELU) at ViT-Ti's width and TINY_VIT's 4 blocks
SMALL_CLIP = ['model.backbone.name=vit_base_patch16_clip_quickgelu_224', 'model.backbone.embed_dim=192',
              'model.backbone.num_heads=3', 'model.backbone.depth=4', 'model.backbone.out_indices=[0,1,2,3]']
# a SigLIP tower (no class token: the neck reads no readout token; LayerNorm eps 1e-6) at the same width and depth
SMALL_SIGLIP = ['model.backbone.name=vit_base_patch16_siglip_224', 'model.backbone.embed_dim=192',
                'model.backbone.num_heads=3', 'model.backbone.depth=4', 'model.backbone.out_indices=[0,1,2,3]']
# DINOv3 (CLS + 4 registers, LayerScale, DINOv3's RoPE, no position table) at the same width and depth
SMALL_DINOV3 = ['model.backbone.name=vit_small_patch16_dinov3', 'model.backbone.embed_dim=192',
                'model.backbone.num_heads=3', 'model.backbone.depth=4', 'model.backbone.out_indices=[0,1,2,3]']
# Perception Encoder core Ti/16 (LayerNorm before the blocks, learned positions + RoPE from 1) with 4 blocks
SMALL_PE = ['model.backbone.name=vit_pe_core_tiny_patch16_384', 'model.backbone.depth=4',
            'model.backbone.out_indices=[0,1,2,3]']
# EVA-02 Ti/14 (learned positions + axial RoPE, SwiGLU, q/v biases) with 4 blocks; its stride-14 grid reassembled
# by x4 / x2 / x1 / x0.5 as Depth Anything does (strides 3.5 to 28)
SMALL_EVA02 = ['model.backbone.name=eva02_tiny_patch14_224', 'model.backbone.depth=4',
               'model.backbone.out_indices=[0,1,2,3]', 'model.neck.out_strides=[3.5,7,14,28]',
               'model.data_preprocessor.size_divisor=14', 'train_dataloader.dataset.pipeline.3.crop_size=[112,154]']
# AIMv2 large/14 (RMSNorm, no biases, SwiGLU, no CLS token) cut to ViT-Ti's width and 4 blocks; EVA-02's stride-14
# neck, padding and crops
SMALL_AIMV2 = ['model.backbone.name=aimv2_large_patch14_224', 'model.backbone.embed_dim=192',
               'model.backbone.num_heads=3', 'model.backbone.depth=4', *SMALL_EVA02[2:]]

# C-RADIOv3 B/16 (summary token + 7 registers, no positions on them, a cropped position table, LayerScale) at ViT-Ti's
# width with 4 blocks
SMALL_RADIO = ['model.backbone.name=vit_base_patch16_radio_v3', 'model.backbone.embed_dim=192',
               'model.backbone.num_heads=3', 'model.backbone.depth=4', 'model.backbone.out_indices=[0,1,2,3]']

# InternViT-300M (LayerScale 0.1, no final norm, ImageNet statistics) at ViT-Ti's width with 4 blocks; EVA-02's
# stride-14 neck, padding and crops
SMALL_INTERNVIT = ['model.backbone.name=vit_intern300m_patch14_448', 'model.backbone.embed_dim=192',
                   'model.backbone.num_heads=3', 'model.backbone.depth=4', *SMALL_EVA02[2:]]
# NaFlex SigLIP 2 B/16 (patch Linear, its 16x16 position table resampled to each image's grid, MAP pool unused) at
# ViT-Ti's width with 4 blocks, fed the usual batch tensor
SMALL_NAFLEX = ['model.backbone.name=naflexvit_base_patch16_siglip', 'model.backbone.embed_dim=192',
                'model.backbone.num_heads=3', 'model.backbone.depth=4', 'model.backbone.out_indices=[0,1,2,3]']

# Iterations: about 1.5x what each took to clear the bar in a trial run with validation every 40 iterations
# (at 160x120: ViT 16.1 mIoU at 50, CvT 14.2 at 40, CoAtNet 16.1 at 40, CrossViT 17.8 at 80; CLIP, validated every
# 20 of 80, 16.9 at 20, 19.0 at 60, 20.8 at 80). These runs on an AVX2 EPYC (2026-12-02): ViT 17.1, CvT 17.8,
# CrossViT 16.8 against a bar of 10.7; CLIP at 30 on an AVX-512/AMX Xeon (2026-12-03):
# 15.29 in 27 s with OMP_NUM_THREADS=1 while another job used the other core, 15.24 with 2 threads (twice); SigLIP at
# 30 on the same Xeon: 13.82 in 24 s with OMP_NUM_THREADS=1 (twice), the machine shared with other jobs; DINOv3 14.56
# and EVA-02 13.55 at 30, PE 16.88 at 60 (9.85 at 30, under the bar), each with one thread beside the test suite;
# AIMv2 15.70 at 30 in 29 s (one thread, other jobs beside); C-RADIOv3 15.93 at 30 (one thread, 1 min 35 s with a
# benchmark beside); InternViT-300M 15.79 at 30 in 21 s and NaFlex 14.35 at 60 in 24 s (10.51 at 30, under the bar),
# 2 threads on the quiet Xeon. CrossViT at 80 on an AVX2 EPYC (2026-12-04): 16.46 (one thread, another test beside).
@pytest.mark.parametrize('backbone,iters', [(TINY_VIT, 75), (SMALL_CVT, 60), (SMALL_COATNET, 60),
                                               (SMALL_CROSSVIT, 80), (SMALL_CLIP, 30),
                                               (SMALL_SIGLIP, 30), (SMALL_DINOV3, 30), (SMALL_EVA02, 30),
                                               (SMALL_PE, 60), (SMALL_AIMV2, 30), (SMALL_RADIO, 30),
                                               (SMALL_INTERNVIT, 30), (SMALL_NAFLEX, 60)],
                         ids=['vit', 'cvt', 'coatnet', 'crossvit', 'clip', 'siglip', 'dinov3', 'eva02', 'pe',
                              'aimv2', 'radio', 'internvit', 'naflex'])
def test_camvid_short_run_beats_the_majority_class(backbone, iters, tmp_path):
    """The CamVid DPT config with a small backbone (ViT-Ti with 4 blocks; CvT-13 with depths 1/1/2; CoAtNet-0 with
    one block per stage, a third of its widths; CrossViT-Ti with two multi-scale blocks of one block per branch; a
    CLIP ViT-B/16 QuickGELU tower at ViT-Ti's width with 4 blocks), images resized to 160x120 to keep CI short."""
    import cv2
    root = shared_data('camvid')
    read = lambda split: [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in  # noqa: E731
                          sorted((root / 'annotations' / split).glob('*.png'))]
    to_ignore = lambda labels: [np.where(m == 11, 255, m) for m in labels]  # noqa: E731
    baseline = majority_class_miou(to_ignore(read('train')), to_ignore(read('val')), 11)
    train_tool.main([
        'configs/dpt_vitb_camvid.py', '--work-dir', str(tmp_path), '--data-root', str(root), '--cfg-options',
        'model.backbone.drop_path_rate=0.0', 'model.neck.hidden_channels=[32,64,128,192]',
        'model.neck.fusion_channels=64', 'model.decode_head.in_channels=64',
        'train_dataloader.dataset.pipeline.2.scale=[160,120]',
        'train_dataloader.dataset.pipeline.3.crop_size=[112,160]',
        'val_dataloader.dataset.pipeline.1.scale=[160,120]', 'train_dataloader.batch_size=8',
        'effective_batch_size=None',  # batch 8 as tuned (the ViT-B recipe's 16 would accumulate two iterations)
        'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
        'val_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False',
        'optim_wrapper.optimizer.lr=1e-3', 'param_scheduler.0.end=20', 'param_scheduler.1.begin=20',
        f'param_scheduler.1.end={iters}', f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}',
        f'default_hooks.checkpoint.interval={iters}', *backbone])  # last: a backbone's own crop or padding wins
    # the Runner logged the validation mIoU of the last evaluation
    log = next(tmp_path.glob('*/vis_data/scalars.json')).read_text().splitlines()
    miou = [json.loads(line)['mIoU'] for line in log if 'mIoU' in line][-1]
    print(f'CamVid val mIoU {miou:.2f} vs majority class {baseline:.2f}')
    assert miou > 2 * baseline and miou > baseline + 8


def test_seven_scenes_short_run_beats_predicting_the_mean_depth(tmp_path):
    """ViT-Ti (4 blocks) DPT on 160x120 images; a trial run reached AbsRel 0.21 at 100-200 iterations, 0.19 at
    300, against 0.32 for the mean depth (the bar: 0.24). 160 iterations (one thread, beside another test, on an
    AVX2 EPYC, 2026-12-04): 0.215 in 3.2 min; 240 gave 0.205 in 5 min."""
    import cv2
    root = shared_data('depth-7scenes')
    read = lambda split: [cv2.imread(str(root / 'depth' / f'{stem}.png'), cv2.IMREAD_UNCHANGED).astype(np.float64)  # noqa: E731
                          for stem in (root / f'{split}.txt').read_text().split()]
    valid = lambda d: (d > 0) & (d < 65535)  # noqa: E731
    train_mean = np.mean(np.concatenate([d[valid(d)] for d in read('train')])) / 1000
    baseline = np.mean([np.mean(np.abs(train_mean - d[valid(d)] / 1000) / (d[valid(d)] / 1000)) for d in read('val')])
    train_tool.main([
        'configs/dpt_vitt4_7scenes_cpu.py', '--work-dir', str(tmp_path / 'work'), '--data-root', str(root),
        '--cfg-options', 'train_dataloader.dataset.pipeline.2.scale=[160,120]',
        'val_dataloader.dataset.pipeline.1.scale=[160,120]', 'predict_scale=[160,120]', 'train_cfg.max_iters=160',
        'train_cfg.val_interval=160', 'param_scheduler.1.end=160', 'default_hooks.checkpoint.interval=160'])
    log = next((tmp_path / 'work').glob('*/vis_data/scalars.json')).read_text().splitlines()
    final = [json.loads(line) for line in log if 'abs_rel' in line][-1]
    print(f"7-Scenes val AbsRel {final['abs_rel']:.3f} (mean-depth predictor {baseline:.3f}), d1 {final['d1']:.3f}")
    assert final['abs_rel'] < 0.75 * baseline
