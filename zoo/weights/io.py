"""Reading checkpoints from disk without ever running pickled code, and saying clearly why a file is refused.

Every read of a weights file goes through :func:`read_file`:

- local files only: a URL (anything with ``://``) is refused, nothing is downloaded at run time;
- a checksum sidecar written after the data (``<file>.sha256``, :mod:`zoo.weights.checksum`) is verified;
- ``.safetensors`` (or a file holding safetensors weights) is read by safetensors; zip and pickle files by
  ``torch.load(weights_only=True)``, which refuses pickles that would import or call code;
- anything else (text, an array, an image, random bytes) is "not a checkpoint", saying what was found;
- what was read must be a mapping (a state dict or a training checkpoint), else "not a checkpoint" too.
"""
from __future__ import annotations

import logging
import pickle
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

import torch

from .checksum import checksum_mismatch
from .sniff import describe_object, pickle_imports, sniff

log = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file or the keys."""


class UnsafeCheckpointError(CheckpointError):
    """A pickle that would import or call code beyond tensors and plain containers."""


class NotACheckpointError(CheckpointError):
    """A file that holds something other than a checkpoint (text, an array, a list, random bytes...)."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint whose bytes no longer match the checksum written with it."""


class RemoteCheckpointError(CheckpointError):
    """A URL where a local checkpoint file is expected: nothing is downloaded at run time."""


# Containers that training frameworks wrap a state dict in (mmengine/mmseg, DeiT, timm EMA, DDP).
_WRAPPERS = ('state_dict', 'model', 'module', 'model_state')
HF_WEIGHT_FILES = ('model.safetensors', 'pytorch_model.bin')
EXPECTED = "a torch checkpoint (.pth/.pt/.bin written by torch.save) or a .safetensors file"
#: Words of torch's weights-only refusals of code (an import, a call, an object build), as opposed to bytes
#: that are no pickle at all ("Unsupported operand", ...).
_REFUSED_CODE = re.compile(r'GLOBAL|allowlisted|add_safe_globals')


def check_local(source) -> None:
    """Refuse URLs (``http://``, ``s3://``, mmengine's ``open-mmlab://`` ...): checkpoints are read from disk; and
    the empty path, which ``Path`` reads as the current folder (whose ``model.safetensors`` would load by accident)."""
    if isinstance(source, str) and not source.strip():
        raise NotACheckpointError(
            f"the checkpoint path is empty ({source!r}): it names no file. For no weights pass None (pretrained=None, "
            f"or --cfg-options model.backbone.pretrained=None), else the path of the file or folder to read")
    if '://' in str(source):
        raise RemoteCheckpointError(
            f"refusing to read {source}: remote checkpoints are not downloaded at run time. Download the file "
            f"yourself from a source you trust, check it, and pass its local path")


def resolve_weight_file(path) -> Path:
    """A local weights file, or the weights file inside a Hugging Face ``save_pretrained`` folder: the first of
    ``HF_WEIGHT_FILES`` (by exact name) it has, logged; no other file of a folder is ever taken."""
    check_local(path)  # before Path(), which would fold 'https://' into 'https:/'
    path = Path(path)
    if path.is_dir():
        for name in HF_WEIGHT_FILES:
            if (path / name).is_file():
                log.info("weights of folder %s: reading %s (the first of %s it has)", path, name,
                         ', '.join(HF_WEIGHT_FILES))
                return path / name
        raise FileNotFoundError(f"no weights file in folder {path}: expected one of {', '.join(HF_WEIGHT_FILES)}")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    return path


def _read_safetensors(path: Path, found: str) -> Mapping:
    from safetensors.torch import load_file
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises its own error types for truncated/corrupt headers
        raise CheckpointError(f"cannot read safetensors file {path} ({found}): {err}") from err


def _detail(err: Exception) -> str:
    """The line of torch's weights-only error that says what it met (not its advice about weights_only)."""
    text = str(err)
    match = re.search(r'WeightsUnpickler error:\s*([^\n]+)', text)
    return match[1].strip() if match else (text.splitlines() or [type(err).__name__])[0]


def _torch_load(path: Path, kind: str, found: str):
    try:
        with warnings.catch_warnings():  # torch's note on other pickle protocols: our error says more, or none is due
            warnings.filterwarnings('ignore', message='Detected pickle protocol')
            return torch.load(path, map_location='cpu', weights_only=True)
    except Exception as err:  # the unpickler and the zip reader raise many types for damaged bytes
        imports = pickle_imports(path) if kind == 'pickle' else []
        if imports or (isinstance(err, pickle.UnpicklingError) and _REFUSED_CODE.search(str(err))):
            what = f" (it imports {', '.join(imports[:5])})" if imports else ''
            raise UnsafeCheckpointError(
                f"refusing to load {path}: it contains pickled objects other than tensors and plain containers"
                f"{what}, and loading it could run arbitrary code. If you trust the file, re-save its state dict "
                f"(e.g. as .safetensors) from a trusted environment. Details: {_detail(err)}") from err
        if kind == 'pickle' or isinstance(err, pickle.UnpicklingError):
            raise NotACheckpointError(f"{path} is not a readable checkpoint: it is {found} that torch cannot read "
                                      f"as one ({_detail(err)}): truncated, or not written by torch.save; "
                                      f"expected {EXPECTED}") from err
        raise CheckpointError(f"cannot read checkpoint {path} (truncated or not a torch file? it is {found}): "
                              f"{type(err).__name__}: {_detail(err)}") from err


def read_file(path) -> Mapping:
    """The mapping stored in a .safetensors / .pth / .pt / .bin file, read as the module docstring says."""
    check_local(path)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    damaged = checksum_mismatch(path)
    if damaged:
        raise CorruptCheckpointError(f"checkpoint {path} is damaged: {damaged}; use an earlier checkpoint")
    kind, found = sniff(path)
    if path.suffix == '.safetensors' or kind == 'safetensors':
        return _read_safetensors(path, found)
    if kind not in ('zip', 'pickle'):
        raise NotACheckpointError(f"{path} is not a checkpoint: it is {found}; expected {EXPECTED}")
    value = _torch_load(path, kind, found)
    if not isinstance(value, Mapping):
        raise NotACheckpointError(f"{path} is not a checkpoint: it holds {describe_object(value)}, where a "
                                  f"checkpoint holds a mapping of parameter names to tensors")
    return value


def read_state_dict(source) -> dict[str, torch.Tensor]:
    """A flat ``{key: tensor}`` dict from a path, an HF folder or a mapping, unwrapped from training containers."""
    state = source if isinstance(source, Mapping) else read_file(resolve_weight_file(source))
    name = '' if isinstance(source, Mapping) else f' {source}'
    for wrapper in _WRAPPERS:
        if wrapper in state and isinstance(state[wrapper], Mapping):
            state = state[wrapper]
            break
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise NotACheckpointError(f"no tensors found in checkpoint{name}; top-level keys: {list(state)[:10]}")
    not_names = [k for k in tensors if not isinstance(k, str)]
    if not_names:
        raise NotACheckpointError(f"checkpoint{name} is not a state dict: its tensors are keyed by "
                                  f"{type(not_names[0]).__name__}s such as {not_names[0]!r}, not parameter names")
    if all(k.startswith('module.') for k in tensors):  # saved from a DistributedDataParallel wrapper
        tensors = {k[len('module.'):]: v for k, v in tensors.items()}
    return tensors
