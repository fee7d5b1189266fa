"""tools/video_consistency.py: depth models compared on one video's frames, each predicted as tools/infer.py
--sequence predicts it (a video model in its aligned windows, an image model frame by frame); its figures are those
of heads.evaluation on those predictions, a steady constant depth is no consistency at an accuracy cost, and
configs validating on other frames are refused. An RGB-D folder of 6 synthetic frames (a camera sliding over a
textured slanted plane) with seeded tiny models: Video Depth Anything's small reference model and a Depth Anything
V2 of the same backbone."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import video_consistency

from heads import Predictor
from heads.evaluation.temporal import align_sequence, depth_of, temporal_consistency
from heads.models.depth_anything import depth_anything_v2_config
from heads.models.video_depth_anything import video_depth_anything_config
from heads.registry import MODELS

REFERENCE = Path(__file__).resolve().parents[1] / 'reference_data' / 'vda_authors.pt'


def folder_of_frames(root: Path, n: int = 6) -> Path:
    """rgb/f<i>.png (56x70 texture shifted 2 px a frame), depth/f<i>.png (millimetres: a slanted plane, holes)."""
    rng = np.random.default_rng(0)
    texture = cv2.resize(rng.integers(0, 256, (14, 40, 3), dtype=np.uint8), (200, 56), interpolation=cv2.INTER_CUBIC)
    (root / 'rgb').mkdir(parents=True)
    (root / 'depth').mkdir()
    for i in range(n):
        cv2.imwrite(str(root / 'rgb' / f'f{i}.png'), texture[:, 2 * i:2 * i + 70])
        depth = np.tile(np.linspace(1000, 3000, 70), (56, 1)) + 20 * i
        depth[:5, :5] = 0
        cv2.imwrite(str(root / 'depth' / f'f{i}.png'), depth.astype(np.uint16))
    (root / 'val.txt').write_text(''.join(f'f{i}\n' for i in range(n)))
    return root


def config_file(path: Path, model: dict, data_root: Path, list_file: str = 'val.txt') -> Path:
    dataset = dict(type='RGBDFolderDataset', data_root=str(data_root), list_file=list_file, intrinsics=None,
                   pipeline=[])
    path.write_text(f'model = {model!r}\nval_dataloader = dict(dataset={dataset!r})\n')
    return path


def tiny(cfg: dict) -> dict:
    cfg['neck'].update(hidden_channels=(32, 32, 32, 32), fusion_channels=32)
    cfg['decode_head'].update(in_channels=32)
    return cfg


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp('video')
    data = folder_of_frames(root / 'data')
    vda = tiny(video_depth_anything_config('vits', embed_dim=32, num_heads=2, mlp_ratio=2.0))
    dav2 = tiny(depth_anything_v2_config('vits', embed_dim=32, num_heads=2, mlp_ratio=2.0))
    torch.save(torch.load(REFERENCE, weights_only=True)['state'], root / 'vda.pth')
    torch.manual_seed(0)
    model = MODELS.build(dav2)
    with torch.no_grad():  # a positive output (the head ends in a ReLU): its last conv's bias raised
        model.decode_head.conv3.bias.fill_(1.0)
    torch.save({'state_dict': model.state_dict()}, root / 'dav2.pth')
    return (data, config_file(root / 'vda.py', vda, data), root / 'vda.pth',
            config_file(root / 'dav2.py', dav2, data), root / 'dav2.pth')


@pytest.mark.slow  # ~2.5 s: both models predict 6 frames twice
def test_the_figures_are_those_of_each_models_own_predictions(setup):
    data, vda_cfg, vda_pth, dav2_cfg, dav2_pth = setup
    rows = video_consistency.main(['--model', 'vda', str(vda_cfg), str(vda_pth),
                                   '--model', 'dav2', str(dav2_cfg), str(dav2_pth)])
    assert [r['model'] for r in rows] == ['vda', 'dav2'] and all(r['frames'] == 6 for r in rows)
    frames = [data / 'rgb' / f'f{i}.png' for i in range(6)]
    gts = [cv2.imread(str(data / 'depth' / f'f{i}.png'), cv2.IMREAD_UNCHANGED) / 1000.0 for i in range(6)]
    images = [cv2.imread(str(f))[..., ::-1] for f in frames]
    for row, (cfg, pth) in zip(rows, [(vda_cfg, vda_pth), (dav2_cfg, dav2_pth)]):
        predictor = Predictor(str(cfg), pth)
        preds = predictor.video(frames) if row['model'] == 'vda' else [predictor(f) for f in frames]
        assert row['temporal_consistency_percent'] == pytest.approx(
            temporal_consistency([depth_of(p, True) for p in preds], images), rel=1e-9)
        aligned = align_sequence(preds, gts)
        depth = np.concatenate([depth_of(a, True).ravel() for a in aligned])
        gt = np.concatenate([g.ravel() for g in gts])
        mask = (gt > 0) & (depth > 0)
        assert row['abs_rel'] == pytest.approx(np.mean(np.abs(depth[mask] - gt[mask]) / gt[mask]), rel=1e-6)


def test_a_constant_depth_is_steady_but_inaccurate(setup):
    """No flicker at all, and the accuracy of a plane-blind guess: the pair of figures tells it apart."""
    data, *_ = setup
    gts = [cv2.imread(str(data / 'depth' / f'f{i}.png'), cv2.IMREAD_UNCHANGED) / 1000.0 for i in range(6)]
    constant = [np.full_like(g, 0.5) for g in gts]
    assert temporal_consistency([depth_of(p, True) for p in constant]) == 0
    assert video_consistency.accuracy(constant, gts, relative=True, max_depth=10)['abs_rel'] > 0.2
    assert video_consistency.accuracy([1 / np.maximum(g, 1e-3) for g in gts], gts, True, 10)['abs_rel'] < 1e-6


def test_configs_on_other_frames_are_refused(setup, tmp_path):
    data, vda_cfg, vda_pth, dav2_cfg, dav2_pth = setup
    (data / 'five.txt').write_text(''.join(f'f{i}\n' for i in range(5)))
    other = config_file(tmp_path / 'other.py', json.loads(json.dumps(
        tiny(depth_anything_v2_config('vits', embed_dim=32, num_heads=2, mlp_ratio=2.0)))), data, 'five.txt')
    with pytest.raises(SystemExit, match='validates on other frames than'):
        video_consistency.main(['--model', 'vda', str(vda_cfg), str(vda_pth), '--model', 'x', str(other),
                                str(dav2_pth)])
