"""Reference models with non-trivial weights, written to real checkpoint files."""
from __future__ import annotations

import pytest
import torch


def perturb_(model: torch.nn.Module, std: float = 0.02) -> torch.nn.Module:
    """Add noise to every parameter so that LayerNorm weights, biases and tokens are not at their init."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * std)
    return model


def timm_reference(name: str, **kwargs) -> torch.nn.Module:
    timm = pytest.importorskip('timm')
    kwargs.setdefault('num_classes', 1000)  # some timm configs default to a headless model (DINO weights)
    return perturb_(timm.create_model(name, pretrained=False, **kwargs)).eval()


def save_safetensors(model: torch.nn.Module, path) -> str:
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return str(path)


def shared_data(*parts):
    """A path under the shared real-data folder (``ZOO_DATA`` overrides ``../shared/data``); skips if absent."""
    import os
    from pathlib import Path
    root = Path(os.environ.get('ZOO_DATA', Path(__file__).resolve().parents[2] / 'shared' / 'data'))
    path = root.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data {path} is not available (set ZOO_DATA to its folder)")
    return path


def tiny_dpt(task: str = 'seg', **overrides) -> dict:
    """Config of a small DPT model (4-block ViT-Ti) for fast tests."""
    backbone = dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, out_indices=(0, 1, 2, 3))
    neck = dict(type='DPTNeck', hidden_channels=(16, 32, 64, 64), fusion_channels=32)
    if task == 'seg':
        cfg = dict(type='Segmentor', backbone=backbone, neck=neck,
                   decode_head=dict(type='DPTSegHead', num_classes=11, in_channels=32),
                   auxiliary_head=dict(type='DPTSegHead', num_classes=11, in_channels=32, upsample=False))
    else:
        cfg = dict(type='DepthEstimator', backbone=backbone, neck=neck,
                   decode_head=dict(type='DPTDepthHead', in_channels=32, mode=task, max_depth=10.0))
    return {**cfg, **overrides}
