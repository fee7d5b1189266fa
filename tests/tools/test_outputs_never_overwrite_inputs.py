"""Every tool of tools/ that writes files, its output pointed at its own input (or at the folder holding its inputs):
the tool may refuse or write elsewhere, but every input file keeps its bytes (each file of the case's folder hashed
before and after, links followed). Tiny inputs: the quickstart at a toy size, a two-Linear ONNX file, a CamVid-like
folder of two 32x32 images."""
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from heads.io.images import write_rgb

ROOT = Path(__file__).resolve().parents[2]


def tool(name: str):
    spec = importlib.util.spec_from_file_location(f'{name}_tool', ROOT / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob('*')) if p.is_file()}


def toy_config(path: Path) -> Path:
    """configs/quickstart.py at a toy size: two iterations, four validation scenes."""
    path.write_text(f"_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']\nsize = (32, 32)\n"
                    "model = dict(backbone=dict(img_size=size, embed_dim=32, num_heads=2), "
                    "neck=dict(hidden_channels=(8, 8, 8, 8), fusion_channels=8), decode_head=dict(in_channels=8))\n"
                    "train_dataloader = dict(batch_size=2, dataset=dict(num_samples=8, size=size))\n"
                    "val_dataloader = dict(batch_size=4, dataset=dict(num_samples=4, size=size))\n"
                    "train_cfg = dict(max_iters=2, val_interval=2)\n"
                    "default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))\n")
    return path


def toy_weights(config: Path, path: Path) -> Path:
    """The toy model's state dict as .safetensors."""
    import torch
    from mmengine.config import Config
    from safetensors.torch import save_file

    from heads.registry import MODELS
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(str(config)).model)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


def onnx_file(path: Path) -> Path:
    from .test_quantize import token_mlp
    rng = np.random.default_rng(0)
    return token_mlp(path, rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((8, 2)).astype(
        np.float32))


def camvid_like(root: Path) -> Path:
    """images/train/000{1,2}.jpg with annotations/train/000{1,2}.png (classes 0 and 8, Car)."""
    import cv2
    rng = np.random.default_rng(0)
    for stem in ('0001', '0002'):
        write_rgb(root / 'images' / 'train' / f'{stem}.jpg', rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
        labels = np.zeros((32, 32), np.uint8)
        labels[8:24, 8:24] = 8
        (root / 'annotations' / 'train').mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(root / 'annotations' / 'train' / f'{stem}.png'), labels)
    return root


def images(folder: Path) -> Path:
    rng = np.random.default_rng(1)
    for sub in ('a', 'b'):  # two inputs of one name in two folders
        write_rgb(folder / sub / '001.png', rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
    return folder


def quantize_out(d):
    model = onnx_file(d / 'model.onnx')
    return 'quantize', [str(model), '--out', str(model)]


def quantize_json(d):
    model = onnx_file(d / 'model.onnx')
    return 'quantize', [str(model), '--out', str(d / 'int8.onnx'), '--json', str(model)]


def convert_timm(d):
    (d / 'timm.safetensors').write_bytes(b'weights')
    return 'convert_weights', ['timm', 'vit_tiny_patch16_224', str(d / 'timm.safetensors'), str(d / 'timm.safetensors')]


def convert_hf(d):
    (d / 'hf').mkdir()
    (d / 'hf' / 'config.json').write_text('{"model_type": "dpt"}')
    (d / 'hf' / 'model.safetensors').write_bytes(b'weights')
    return 'convert_weights', ['hf-dpt', str(d / 'hf'), str(d / 'hf')]


def export_model_config(d):
    config = toy_config(d / 'toy.py')
    return 'export_model', ['--config', str(config), '--out', str(config)]


def export_model_checkpoint(d):
    config = toy_config(d / 'toy.py')
    weights = toy_weights(config, d / 'toy.safetensors')
    return 'export_model', ['--config', str(config), '--checkpoint', str(weights), '--out', str(weights)]


def export_features(d):
    folder = images(d / 'images')
    return 'export_features', ['--backbone', 'vit_tiny_patch16_224', '--backbone-kwargs', '{"depth": 1}',
                               '--folder', str(folder), '--out', str(folder), '--overwrite', '--short-side', '32']


def print_config(d):
    config = toy_config(d / 'toy.py')
    return 'print_config', [str(config), '--out', str(config)]


def browse_dataset(d):
    config = toy_config(d / 'toy.py')
    return 'browse_dataset', [str(config), '--out', str(config), '--num', '1']


def visualize_attention(d):
    image = images(d / 'images') / 'a' / '001.png'
    return 'visualize_attention', ['vit_tiny_patch16_224', str(image), '--out', str(image), '--size', '32']


def evaluate_out(d):
    config = toy_config(d / 'toy.py')
    weights = toy_weights(config, d / 'toy.safetensors')
    return 'test', [str(config), str(weights), '--out', str(weights), '--work-dir', str(d / 'work')]


def evaluate_show_dir(d):
    config = toy_config(d / 'toy.py')
    weights = toy_weights(config, d / 'toy.safetensors')
    return 'test', [str(config), str(weights), '--show-dir', str(config), '--work-dir', str(d / 'work')]


def plot_logs(d):
    log = d / 'work' / '20260101_000000' / 'vis_data' / 'scalars.json'
    log.parent.mkdir(parents=True)
    log.write_text(''.join(json.dumps({'loss': 1.0 / i, 'step': i}) + '\n' for i in range(1, 4)))
    return 'plot_logs', [str(d / 'work'), '--out', str(log)]


def make_patch_dataset(d):
    root = camvid_like(d / 'camvid')
    return 'make_patch_dataset', [str(root), str(root), '--splits', 'train', '--size', '16', '--min-share', '0.1']


def make_patch_dataset_into_images(d):
    root = camvid_like(d / 'camvid')
    return 'make_patch_dataset', [str(root), str(root / 'images'), '--splits', 'train', '--size', '16',
                                  '--min-share', '0.1', '--classes', *(['x'] * 8), 'train']


def make_camvid_detection(d):
    root = camvid_like(d / 'camvid')
    return 'make_camvid_detection', [str(root), str(root), '--splits', 'train', '--min-area', '4']


def make_camvid_detection_into_annotations(d):
    root = camvid_like(d / 'camvid')
    return 'make_camvid_detection', [str(root), str(root / 'annotations' / 'train' / '..' / '..'), '--splits',
                                     'train', '--min-area', '4']


def infer_into_its_inputs(d):
    config = toy_config(d / 'toy.py')
    weights = toy_weights(config, d / 'toy.safetensors')
    folder = images(d / 'images')
    return 'infer', [str(config), str(weights), str(folder / 'a' / '001.png'), str(folder / 'b' / '001.png'),
                     '--out', str(folder / 'a')]


def infer_into_the_folder_of_its_inputs(d):
    config = toy_config(d / 'toy.py')
    weights = toy_weights(config, d / 'toy.safetensors')
    folder = images(d / 'images')
    return 'infer', [str(config), str(weights), str(folder), '--out', str(folder)]


CASES = [quantize_out, quantize_json, convert_timm, convert_hf, print_config, browse_dataset, plot_logs,
         export_model_config, export_model_checkpoint, export_features, visualize_attention, evaluate_out,
         evaluate_show_dir, make_patch_dataset, make_patch_dataset_into_images, make_camvid_detection,
         make_camvid_detection_into_annotations,
         pytest.param(infer_into_its_inputs, marks=pytest.mark.slow),
         pytest.param(infer_into_the_folder_of_its_inputs, marks=pytest.mark.slow)]


@pytest.mark.parametrize('case', CASES, ids=lambda case: case.__name__)
def test_a_tools_output_pointed_at_its_input_leaves_every_input_as_it_was(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a tool's default outputs (curves.png, work_dirs/...) land here, not in the repo
    (tmp_path / 'case').mkdir()
    name, argv = case(tmp_path / 'case')
    before = digests(tmp_path / 'case')
    try:
        tool(name).main(argv)
    except (SystemExit, Exception):  # refusing is right; any error is allowed, losing an input is not
        pass
    after = digests(tmp_path / 'case')
    assert {k: after.get(k) for k in before} == before


@pytest.mark.slow
def test_a_training_rerun_into_a_work_dir_with_checkpoints_keeps_them(tmp_path, monkeypatch):
    """tools/train.py CONFIG --work-dir W a second time without --resume trained from iteration 0 and wrote
    iter_2.pth over the first run's."""
    monkeypatch.chdir(tmp_path)
    config = toy_config(tmp_path / 'toy.py')
    train = tool('train')
    train.main([str(config), '--work-dir', str(tmp_path / 'work')])
    checkpoints = {k: v for k, v in digests(tmp_path / 'work').items() if k.endswith('.pth')}
    assert checkpoints
    try:
        train.main([str(config), '--work-dir', str(tmp_path / 'work'), '--cfg-options', 'randomness.seed=5'])
    except (SystemExit, Exception):
        pass
    after = digests(tmp_path / 'work')
    assert {k: after.get(k) for k in checkpoints} == checkpoints
