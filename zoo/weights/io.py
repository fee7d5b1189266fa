"""Reading checkpoints from disk without ever running pickled code."""
from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path

import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file or the keys."""


class UnsafeCheckpointError(CheckpointError):
    """A pickle that would import or call code beyond tensors and plain containers."""


# Containers that training frameworks wrap a state dict in (mmengine/mmseg, DeiT, timm EMA, DDP).
_WRAPPERS = ('state_dict', 'model', 'module', 'model_state')
HF_WEIGHT_FILES = ('model.safetensors', 'pytorch_model.bin')


def resolve_weight_file(path: Path) -> Path:
    """A weights file, or the weights file inside a Hugging Face ``save_pretrained`` folder."""
    if path.is_dir():
        for name in HF_WEIGHT_FILES:
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(f"no weights file in folder {path}: expected one of {', '.join(HF_WEIGHT_FILES)}")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    return path


def read_file(path: Path) -> Mapping:
    """The raw mapping stored in a .safetensors / .pth / .pt / .bin file, loaded with weights-only semantics."""
    if path.suffix == '.safetensors':
        from safetensors.torch import load_file
        try:
            return load_file(str(path))
        except Exception as err:  # safetensors raises its own error types for truncated/corrupt headers
            raise CheckpointError(f"cannot read safetensors file {path}: {err}") from err
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as err:
        raise UnsafeCheckpointError(
            f"refusing to load {path}: it contains pickled objects other than tensors and plain containers, "
            f"and loading it could run arbitrary code. If you trust the file, re-save its state dict "
            f"(e.g. as .safetensors) from a trusted environment. Details: {err}") from err
    except (RuntimeError, EOFError, OSError) as err:
        raise CheckpointError(f"cannot read checkpoint {path} (truncated or not a torch file?): {err}") from err


def read_state_dict(source) -> dict[str, torch.Tensor]:
    """A flat ``{key: tensor}`` dict from a path, an HF folder or a mapping, unwrapped from training containers."""
    state = source if isinstance(source, Mapping) else read_file(resolve_weight_file(Path(source)))
    for wrapper in _WRAPPERS:
        if wrapper in state and isinstance(state[wrapper], Mapping):
            state = state[wrapper]
            break
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise CheckpointError(f"no tensors found in checkpoint {source if not isinstance(source, Mapping) else ''}; "
                              f"top-level keys: {list(state)[:10]}")
    if all(k.startswith('module.') for k in tensors):  # saved from a DistributedDataParallel wrapper
        tensors = {k[len('module.'):]: v for k, v in tensors.items()}
    return tensors
