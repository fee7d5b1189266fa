"""The error of a checkpoint whose layout a converter recognises but whose keys or tensors are not what that layout
holds (a key missing, a tensor of another rank or length), and the checks the converters make before they index.

Converters see a state dict, not a file: :func:`zoo.weights.load_pretrained` names the file (:meth:`in_file`)."""
from __future__ import annotations

import re

import torch

from .io import CheckpointError


class CheckpointLayoutError(CheckpointError):
    """A key missing from, or a tensor of the wrong form in, a checkpoint of a known layout; the message names the
    key, what was wrong and the fix (and the file, once :meth:`in_file` has added it)."""

    def __init__(self, key: str, problem: str, fix: str, source: str | None = None):
        self.key, self.problem, self.fix, self.source = key, problem, fix, source
        where = f"checkpoint {source}: " if source else ''
        super().__init__(f"{where}key {key!r}: {problem}. {fix}")

    def in_file(self, source) -> CheckpointLayoutError:
        """The same error naming ``source`` (the file or folder the state dict came from)."""
        return CheckpointLayoutError(self.key, self.problem, self.fix, str(source))


def required(state: dict, key: str, layout: str, why: str, name: str | None = None) -> torch.Tensor:
    """``state[key]``, or an error saying that ``layout`` checkpoints have it (``why``: what needs it; ``name``: what
    the file calls ``key`` when the converter has renamed it)."""
    if key not in state:
        raise CheckpointLayoutError(name or key, f"missing: {why}", f"Use the complete checkpoint ({layout} layout: "
                                    f"every key its model saves), re-saved from that model if in doubt")
    return state[key]


def of_rank(value: torch.Tensor, key: str, form: str, fix: str) -> torch.Tensor:
    """``value`` if it has as many dimensions as ``form`` names (e.g. '1 1 d', '1 (1 + h w) d': 3), else an
    error."""
    rank = len(re.sub(r'\([^)]*\)', 'x', form).split())
    if value.ndim != rank:
        raise CheckpointLayoutError(key, f"expected a tensor '{form}' ({rank}-D), got shape {tuple(value.shape)}",
                                    fix)
    return value


def gather_qkv(state: dict, pattern: re.Pattern) -> tuple[dict, dict]:
    """``state`` split into its separate query/key/value tensors, those whose key ``pattern`` matches (named groups
    ``layer``, ``part`` and ``kind``: 'weight' or 'bias'), as ``{(layer, kind): {part: tensor}}``, and the rest."""
    rest, parts = {}, {}
    for key, value in state.items():
        match = pattern.match(key)
        if match:
            parts.setdefault((match['layer'], match['kind']), {})[match['part']] = value
        else:
            rest[key] = value
    return rest, parts


def fused_qkv(parts: dict, prefix: str, kind: str, model: str,
              names: tuple[str, str, str] = ('query', 'key', 'value')) -> torch.Tensor:
    """One layer's query, key and value ``kind`` ('weight' or 'bias'), as transformers' ``model`` saves them under
    ``prefix`` (``parts`` keyed by ``names``, the file's names of the three: ``('q_proj', 'k_proj', 'v_proj')`` in
    CLIP), stacked as the fused qkv's rows; an error naming the key when one is missing or the shapes differ."""
    fix = (f"transformers' {model} saves query, key and value (weight and bias) of every layer, of one shape; the "
           f"weights file is incomplete or damaged: save the model again with save_pretrained")
    for part in names:
        if part not in parts:
            raise CheckpointLayoutError(f'{prefix}.{part}.{kind}', 'missing beside '
                                        f"{', '.join(f'{p}.{kind}' for p in sorted(parts))}", fix)
    shapes = {tuple(v.shape) for v in parts.values()}
    rank = 2 if kind == 'weight' else 1
    if len(shapes) != 1 or len(next(iter(shapes))) != rank:
        raise CheckpointLayoutError(f'{prefix}.{names[0]}.{kind}', f"query, key and value {kind}s must be {rank}-D of "
                                    f"one shape, got {', '.join(f'{p} {tuple(v.shape)}' for p, v in parts.items())}",
                                    fix)
    return torch.cat([parts[name] for name in names])


def stacked(parts: dict, names: tuple[str, ...], key_of, what: str, fix: str) -> torch.Tensor:
    """``parts``' tensors ``names`` stacked as rows (q/k/v into one projection, a SwiGLU's [gate | value]); an error
    naming the file's key (``key_of(name)``) when one is missing or their shapes differ. ``what``: the parts, in
    words ("the SwiGLU's gate and value")."""
    for name in names:
        if name not in parts:
            have = ', '.join('.'.join(key_of(p).split('.')[-2:]) for p in sorted(parts))  # 'q_proj.weight', ...
            raise CheckpointLayoutError(key_of(name), f"missing beside {have} ({what})", fix)
    if len({tuple(parts[n].shape) for n in names}) != 1:
        raise CheckpointLayoutError(key_of(names[0]), f"{what} must have one shape, got "
                                    f"{', '.join(f'{n} {tuple(parts[n].shape)}' for n in names)}", fix)
    return torch.cat([parts[n] for n in names])


def pack_swiglu(state: dict, gate: str, value: str, fix: str, file_key=None) -> dict:
    """Each SwiGLU's input projections ``<prefix>.mlp.<gate>.*`` and ``<prefix>.mlp.<value>.*`` -> one
    ``<prefix>.mlp.fc1.*`` with rows [gate | value] (as :class:`zoo.core.layers.Mlp` with ``gated`` reads them); a half
    missing or of another shape is an error naming the key as the file does (``file_key(key)``, default the key)."""
    pattern = re.compile(rf'^(?P<layer>.+\.mlp)\.(?P<part>{gate}|{value})\.(?P<kind>weight|bias)$')
    out, halves = gather_qkv(state, pattern)
    for (layer, kind), parts in halves.items():
        def key_of(part: str) -> str:
            return (file_key or str)(f'{layer}.{part}.{kind}')
        out[f'{layer}.fc1.{kind}'] = stacked(parts, (gate, value), key_of, "the SwiGLU's gate and value", fix)
    return out
