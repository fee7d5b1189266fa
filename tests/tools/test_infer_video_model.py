"""tools/infer.py with a video model (Video Depth Anything's VideoDepthEstimator): the frames of a sequence are
predicted together, in the aligned windows of heads.Predictor.video, and the temporal figure is written; without
--sequence the run is refused before anything is predicted. The weights are the authors' small seeded model of
tests/reference_data/vda_authors.pt (made by tests/reference_data/vda_authors.py)."""
from __future__ import annotations

import json
from pathlib import Path

import infer
import numpy as np
import pytest
import torch

from heads import Predictor
from heads.io.images import write_rgb
from heads.models.video_depth_anything import video_depth_anything_config

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / 'tests' / 'reference_data' / 'vda_authors.pt'


def tiny_video_model(folder: Path) -> tuple[Path, Path, dict]:
    """A config of the reference's small model and its weights (the authors' layout)."""
    cfg = video_depth_anything_config('vits', embed_dim=32, num_heads=2, mlp_ratio=2.0)
    cfg['neck'].update(hidden_channels=(32, 32, 32, 32), fusion_channels=32)
    cfg['decode_head'].update(in_channels=32)
    config = folder / 'vda_tiny.py'
    config.write_text(f'model = {cfg!r}\n')
    checkpoint = folder / 'vda_tiny.pth'
    torch.save(torch.load(REFERENCE, weights_only=True)['state'], checkpoint)
    return config, checkpoint, cfg


def test_a_video_models_sequence_is_predicted_in_windows_with_its_figure(tmp_path, capsys):
    config, checkpoint, cfg = tiny_video_model(tmp_path)
    frames = torch.load(REFERENCE, weights_only=True)['video']['frames'][:6].numpy()  # 'n 42 56 3' uint8
    (tmp_path / 'clip').mkdir()
    for i, frame in enumerate(frames):
        write_rgb(tmp_path / 'clip' / f'frame_{i}.png', frame)
    infer.main([str(config), str(checkpoint), str(tmp_path / 'clip'), '--out', str(tmp_path / 'out'), '--sequence',
          '--depth-format', 'npy'])
    want = Predictor({'model': cfg}, checkpoint).video([tmp_path / 'clip' / f'frame_{i}.png' for i in range(6)])
    for i in range(6):
        np.testing.assert_array_equal(np.load(tmp_path / 'out' / f'frame_{i}_pred.npy'), want[i])
    figures = json.loads((tmp_path / 'out' / 'temporal.json').read_text())
    assert figures['frames'] == 6 and figures['temporal_consistency_percent'] > 0
    assert 'temporal consistency over 6 frames' in capsys.readouterr().out


def test_a_video_model_without_sequence_is_refused_before_predicting(tmp_path):
    config, checkpoint, _ = tiny_video_model(tmp_path)
    write_rgb(tmp_path / 'frame.png', np.zeros((42, 56, 3), np.uint8))
    with pytest.raises(SystemExit, match='predicts clips of consecutive frames: give the frames of one video'):
        infer.main([str(config), str(checkpoint), str(tmp_path / 'frame.png'), '--out', str(tmp_path / 'out')])
    assert not (tmp_path / 'out').exists()
