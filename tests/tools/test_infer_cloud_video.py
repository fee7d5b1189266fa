"""tools/infer.py on real 7-Scenes frames with the CPU 7-Scenes config and a checkpoint of it: PLY point clouds that
re-project to the predicted depth maps, and the temporal-consistency figure of the sequence, raw and smoothed."""
import json
import shutil
from pathlib import Path

import cv2
import infer  # tools/infer.py (pyproject.toml's pytest pythonpath puts tools/ on the path)
import numpy as np
import pytest
import torch

from heads.evaluation.temporal import smooth_sequence, temporal_consistency
from heads.io.depth import read_intrinsics
from heads.io.images import read_rgb
from heads.io.pointcloud import project, read_ply

from ..reference import shared_data

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / 'configs' / 'dpt_vitt4_7scenes_cpu.py')
FRAMES = ('frame-000000', 'frame-000002', 'frame-000004')


@pytest.fixture(scope='module')
def frames_and_checkpoint(tmp_path_factory):
    """Three consecutive real 7-Scenes frames and a checkpoint of the CPU config's model (seeded initial weights)."""
    from mmengine.config import Config

    from heads.models.task_checkpoint import without_backbone_weights
    from heads.registry import MODELS
    root = shared_data('depth-7scenes')
    folder = tmp_path_factory.mktemp('cloud')
    (folder / 'rgb').mkdir()
    for stem in FRAMES:
        shutil.copy(root / 'rgb' / f'{stem}.jpg', folder / 'rgb')
    torch.manual_seed(0)
    model = MODELS.build(without_backbone_weights(Config.fromfile(CONFIG).model))
    torch.save({'state_dict': model.state_dict()}, folder / 'model.pth')
    return folder, root / 'camera-intrinsics.txt'


@pytest.mark.slow  # ~11 s on 2 cores: the model is built and run twice on 3 frames of 640x480
def test_ply_files_and_the_figure_of_a_7_scenes_sequence(frames_and_checkpoint, capsys):
    folder, intrinsics = frames_and_checkpoint
    out = folder / 'out'
    infer.main([CONFIG, str(folder / 'model.pth'), str(folder / 'rgb'), '--out', str(out), '--intrinsics',
                str(intrinsics), '--ply', '--sequence'])
    printed = capsys.readouterr().out
    images = [read_rgb(folder / 'rgb' / f'{stem}.jpg') for stem in FRAMES]
    depths = []
    for stem in FRAMES:  # each cloud, projected with the intrinsics, is the predicted depth map (the PNG's mm)
        points, colours = read_ply(out / f'{stem}.ply')
        depth = project(points, read_intrinsics(intrinsics), size=(640, 480))
        millimetres = cv2.imread(str(out / f'{stem}_pred.png'), cv2.IMREAD_UNCHANGED)
        assert (depth > 0).all() and len(points) == 640 * 480  # a metric head predicts every pixel
        np.testing.assert_allclose(depth * 1000, millimetres, atol=0.5 + 1e-3)
        assert np.array_equal(colours, images[FRAMES.index(stem)].reshape(-1, 3))
        depths.append(depth)
    figure = temporal_consistency(depths, images)  # the projected clouds are the float32 predictions
    saved = json.loads((out / 'temporal.json').read_text())
    assert saved['frames'] == 3 and saved['temporal_consistency_percent'] == pytest.approx(figure, rel=1e-6)
    assert 'over 3 frames' in printed and f'{figure:.2f} %' in printed
    # smoothed: the clouds are the smoothed predictions, and the figure is printed for both
    smooth_out = folder / 'smooth'
    infer.main([CONFIG, str(folder / 'model.pth'), str(folder / 'rgb'), '--out', str(smooth_out), '--intrinsics',
                '585', '585', '320', '240', '--ply', '--sequence', '--smooth', '0.5'])
    printed = capsys.readouterr().out
    smoothed = smooth_sequence(depths, alpha=0.5, mode='median')
    again = [project(read_ply(smooth_out / f'{stem}.ply')[0], read_intrinsics(intrinsics), (640, 480))
             for stem in FRAMES]
    for a, b in zip(again, smoothed):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    figures = json.loads((smooth_out / 'temporal.json').read_text())
    assert figures['temporal_consistency_percent'] == pytest.approx(figure, rel=1e-6)
    assert figures['smoothed_temporal_consistency_percent'] == pytest.approx(temporal_consistency(again, images),
                                                                             rel=1e-6)
    assert f"smoothed (alpha = 0.5): {figures['smoothed_temporal_consistency_percent']:.2f} %" in printed


def test_what_clouds_and_sequences_refuse(tmp_path):
    parse = infer.build_parser().parse_args
    base = ['c.py', 'm.pth', 'x.jpg', '--out', str(tmp_path)]
    with pytest.raises(ValueError, match='--ply needs the camera: give --intrinsics'):
        infer.CloudAndVideo(parse(base + ['--ply']), relative=False, out=tmp_path)
    with pytest.raises(ValueError, match="--ply needs metric depth: this config's model is relative"):
        infer.CloudAndVideo(parse(base + ['--ply', '--intrinsics', '5', '5', '1', '1']), relative=True, out=tmp_path)
    with pytest.raises(ValueError, match='--smooth ALPHA smooths over the frames of a sequence: give --sequence'):
        infer.CloudAndVideo(parse(base + ['--smooth', '0.5']), relative=False, out=tmp_path)
    with pytest.raises(ValueError, match=r'--intrinsics 0 5 1 1: the focal lengths fx = 0'):
        infer.CloudAndVideo(parse(base + ['--ply', '--intrinsics', '0', '5', '1', '1']), relative=False, out=tmp_path)
    with pytest.raises(FileNotFoundError, match='--intrinsics file nowhere.txt does not exist'):
        infer.CloudAndVideo(parse(base + ['--ply', '--intrinsics', 'nowhere.txt']), relative=False, out=tmp_path)
    extras = infer.CloudAndVideo(parse(base + ['--sequence']), relative=False, out=tmp_path)
    with pytest.raises(ValueError, match='for depth models; this config predicts classes'):
        extras(Path('x.jpg'), np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2), np.int64))
