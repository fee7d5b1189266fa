"""Video Depth Anything to ONNX: the graph is one clip, 't 3 H W' -> depth 't 1 H W', dynamic in its frame count
(1 to the model's 32) and size (heads.export.wrappers.ClipOutputs), written by tools/export_model.py --config; the
file's metadata says it is a clip (``clip``), so heads.export.OnnxPredictor and tools/infer.py --sequence run a video
through it in the model's own aligned windows, giving the PyTorch model's depth. A small seeded model (4 blocks,
width 32; 'bicubic' position resampling: the official 'dinov2' one has no dynamic-size form, as for Depth Anything
V2)."""
from __future__ import annotations

import json

import infer
import numpy as np
import pytest
import torch

from heads import Predictor
from heads.export import OnnxPredictor
from heads.export.onnx import onnx_fixed_dims, run_onnx
from heads.io.images import write_rgb
from heads.models.video_depth_anything import video_depth_anything_config
from heads.registry import MODELS


def tiny_cfg() -> dict:
    cfg = video_depth_anything_config('vits', embed_dim=32, num_heads=2, mlp_ratio=2.0, pos_interp='bicubic')
    cfg['backbone'].update(depth=4, out_indices=(0, 1, 2, 3))
    cfg['neck'].update(hidden_channels=(32, 32, 32, 32), fusion_channels=32)
    cfg['decode_head'].update(in_channels=32)
    return cfg


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """(folder, config, checkpoint, onnx file) of the tool's export of a seeded tiny model, every weight perturbed
    (the temporal modules' output projections start at zero)."""
    from export_model import main
    folder = tmp_path_factory.mktemp('vda_onnx')
    torch.manual_seed(0)
    model = MODELS.build(tiny_cfg()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    config, checkpoint, out = folder / 'vda_tiny.py', folder / 'vda_tiny.pth', folder / 'vda_tiny.onnx'
    config.write_text(f'model = {tiny_cfg()!r}\n')
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    assert main(['--config', str(config), '--checkpoint', str(checkpoint), '--out', str(out),
                 '--check', '70', '42']) == 0
    return folder, config, checkpoint, out


@pytest.mark.slow  # ~30 s on 2 cores: one export of the clip graph
def test_the_clip_graph_runs_any_frame_count_and_size_as_pytorch(exported):
    folder, config, checkpoint, out = exported
    assert onnx_fixed_dims(out) == []
    predictor = Predictor(str(config), checkpoint)
    for frames, size in ((5, (70, 42)), (1, (28, 56)), (32, (42, 42))):
        x = torch.randn(1, frames, 3, *size)
        got = torch.from_numpy(run_onnx(out, x[0])[0])[:, 0]
        want = predictor.model.predict_clips(x)[0]
        assert (got - want).abs().max() <= 1e-4 * want.abs().max(), (frames, size)


@pytest.mark.slow
def test_a_video_through_the_onnx_file_is_the_pytorch_models_windows(exported, tmp_path):
    """40 frames (two windows) through OnnxPredictor.video and tools/infer.py --sequence with the .onnx file."""
    folder, config, checkpoint, out = exported
    frames = np.random.default_rng(0).integers(0, 256, (40, 42, 56, 3), dtype=np.uint8)
    want = Predictor(str(config), checkpoint).video(list(frames))
    got = OnnxPredictor(out).video(list(frames))
    scale = max(np.abs(w).max() for w in want)
    assert max(np.abs(g - w).max() for g, w in zip(got, want)) <= 1e-4 * scale
    np.testing.assert_allclose(OnnxPredictor(out)(frames[0]), Predictor(str(config), checkpoint)(frames[0]),
                               rtol=0, atol=1e-4 * scale)  # one image: a one-frame clip
    (tmp_path / 'clip').mkdir()
    for i, frame in enumerate(frames[:6]):
        write_rgb(tmp_path / 'clip' / f'{i:03d}.png', frame)
    infer.main([str(out), str(tmp_path / 'clip'), '--out', str(tmp_path / 'out'), '--sequence',
                '--depth-format', 'npy'])
    alone = OnnxPredictor(out).video(list(frames[:6]))
    for i in range(6):
        np.testing.assert_allclose(np.load(tmp_path / 'out' / f'{i:03d}_pred.npy'), alone[i], rtol=0, atol=1e-6)
    assert json.loads((tmp_path / 'out' / 'temporal.json').read_text())['frames'] == 6
