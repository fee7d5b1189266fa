"""The LoRA adapters' own file (``lora_adapters.safetensors``): its bytes, and reading it back with every part checked.

The file is safetensors: each adapted Linear's ``<name>.lora_a`` ('rank in') and ``<name>.lora_b`` ('out rank'),
and in its metadata ``lora_config``, JSON of the :func:`zoo.lora.apply_lora` options the adapters were trained with:
``targets`` (patterns), ``rank`` and ``alpha`` (numbers; a mapping of module name to number where the Linears
differ) and ``dropout``. Files written before the alpha was recorded for task models hold ``{}``.

:func:`read_adapter_file` refuses, naming the file and the tensor or field, anything that is not such a file: an
unreadable or truncated file, a checksum sidecar that does not match, tensors that are not floating 2-D
``lora_a``/``lora_b`` pairs of one rank, non-finite values, and config fields of the wrong type or range.
Nothing in the model is touched here (:func:`zoo.lora.load_adapters` fits what this returns to a model).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .weights import CheckpointError, CorruptCheckpointError, NotACheckpointError
from .weights.checksum import checksum_mismatch
from .weights.io import check_local

METADATA_KEY = 'lora_config'
PARTS = ('lora_a', 'lora_b')


class NonFiniteAdapterError(CheckpointError):
    """An adapter file holding NaN or infinite values (the message names the tensor and the file)."""


@dataclass
class AdapterFile:
    path: Path
    tensors: dict[str, torch.Tensor]          # '<module>.lora_a' / '<module>.lora_b'
    ranks: dict[str, int]                     # per module, from the tensors' shapes
    config: dict                              # the recorded apply_lora options, checked (may be empty)

    def alphas(self) -> dict[str, float] | None:
        """Per module, the alpha recorded for it; None when the file records none."""
        alpha = self.config.get('alpha')
        if alpha is None:
            return None
        return dict(alpha) if isinstance(alpha, dict) else {name: float(alpha) for name in self.ranks}


def adapter_file_bytes(tensors: dict[str, torch.Tensor], config: dict) -> bytes:
    """The file's content: ``tensors`` and ``config`` as the ``lora_config`` metadata."""
    from safetensors.torch import save
    return save({k: v.detach().contiguous().cpu() for k, v in tensors.items()},
                metadata={METADATA_KEY: json.dumps(config)})


def read_adapter_file(path) -> AdapterFile:
    """The checked content of an adapter file (module docstring), or a :class:`~zoo.weights.CheckpointError`."""
    check_local(path)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"adapter file {path} does not exist (zoo.lora.save_adapters or a LoRA run's "
                                f"<work_dir>/lora_adapters.safetensors writes one)")
    damaged = checksum_mismatch(path)
    if damaged:
        raise CorruptCheckpointError(f"adapter file {path} is damaged: {damaged}; use an earlier copy or the "
                                     f"adapters in a checkpoint")
    tensors, metadata = _read(path)
    ranks = _check_tensors(path, tensors)
    return AdapterFile(path, tensors, ranks, _check_config(path, metadata, ranks))


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(path), framework='pt') as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    except (SafetensorError, OSError, ValueError, RuntimeError, TypeError) as err:
        raise NotACheckpointError(f"cannot read adapter file {path} (truncated, or not a safetensors file): "
                                  f"{type(err).__name__}: {err}") from err


def _check_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> dict[str, int]:
    if not tensors:
        raise NotACheckpointError(f"adapter file {path} holds no tensors")
    modules = {}
    for key, value in tensors.items():
        module, _, part = key.rpartition('.')
        if part not in PARTS or not module:
            raise NotACheckpointError(f"adapter file {path}: tensor {key!r} is not a LoRA adapter (names end in "
                                      f".lora_a or .lora_b)")
        if not value.is_floating_point() or value.dim() != 2 or 0 in value.shape:
            raise NotACheckpointError(f"adapter file {path}: tensor {key} is {value.dtype} of shape "
                                      f"{tuple(value.shape)}; adapters are non-empty floating-point matrices")
        if not torch.isfinite(value.float()).all():
            bad = int((~torch.isfinite(value.float())).sum())
            raise NonFiniteAdapterError(f"adapter file {path}: tensor {key} has {bad} non-finite (NaN or inf) "
                                        f"values of {value.numel()}; the run that wrote it diverged. Use the "
                                        f"adapters of an earlier checkpoint")
        modules.setdefault(module, {})[part] = value
    ranks = {}
    for module, parts in modules.items():
        if set(parts) != set(PARTS):
            raise NotACheckpointError(f"adapter file {path}: {module} has {sorted(parts)} only; each adapted "
                                      f"Linear has both lora_a and lora_b")
        if parts['lora_a'].shape[0] != parts['lora_b'].shape[1]:
            raise NotACheckpointError(f"adapter file {path}: {module}.lora_a {tuple(parts['lora_a'].shape)} and "
                                      f".lora_b {tuple(parts['lora_b'].shape)} differ in rank")
        ranks[module] = parts['lora_a'].shape[0]
    return ranks


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _per_module(path: Path, field: str, value, ranks: dict[str, int], check) -> None:
    """``value`` is one number, or a mapping covering exactly the file's modules; each passes ``check``."""
    values = value if isinstance(value, dict) else {None: value}
    if isinstance(value, dict) and set(value) != set(ranks):
        raise NotACheckpointError(f"adapter file {path}: metadata {METADATA_KEY}.{field} names modules "
                                  f"{sorted(value)[:4]} where the tensors are of {sorted(ranks)[:4]}")
    for module, number in values.items():
        problem = check(module, number)
        if problem:
            raise NotACheckpointError(f"adapter file {path}: metadata {METADATA_KEY}.{field}"
                                      f"{'' if module is None else f'[{module!r}]'} = {number!r}: {problem}")


def _rank_problem(ranks: dict[str, int], module: str | None, rank) -> str | None:
    if not (isinstance(rank, int) and _number(rank)):
        return 'rank is a positive int'
    found = set(ranks.values()) if module is None else {ranks[module]}
    return None if found == {rank} else f"the tensors have rank {'/'.join(map(str, sorted(found)))}"


def _check_config(path: Path, metadata: dict, ranks: dict[str, int]) -> dict:
    text = metadata.get(METADATA_KEY, '{}')
    try:
        config = json.loads(text)
    except ValueError as err:
        raise NotACheckpointError(f"adapter file {path}: metadata {METADATA_KEY} is not JSON ({err})") from err
    if not isinstance(config, dict):
        raise NotACheckpointError(f"adapter file {path}: metadata {METADATA_KEY} is {type(config).__name__}, "
                                  f"where a dict of apply_lora options is expected")
    if config.get('alpha') is not None:
        _per_module(path, 'alpha', config['alpha'], ranks,
                    lambda module, a: None if _number(a) else 'alpha is a positive finite number')
    if config.get('rank') is not None:
        _per_module(path, 'rank', config['rank'], ranks, lambda module, r: _rank_problem(ranks, module, r))
    targets = config.get('targets')
    if targets is not None and not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
        raise NotACheckpointError(f"adapter file {path}: metadata {METADATA_KEY}.targets = {targets!r}: a list "
                                  f"of module-name patterns is expected")
    return config
