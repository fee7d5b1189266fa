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
