"""Snapshots of every registered backbone's build, to show that a refactoring of the encoders changed nothing.

A snapshot of a name holds its backbone's and classifier's state-dict keys with shapes (built on the meta device,
so that the giant ones cost nothing) and, for a seeded CPU build of the backbone, each tensor's sum and the sum of
its outputs on a fixed input. Names of more than :data:`SMALL` parameters are built seeded with ``depth=1`` where
their class takes ``depth`` (the patch embedding, positions and one block of every family; the parts are made in the
same order at any depth), else only their keys are kept.

``python tests/reference_data/encoder_snapshot.py`` writes :data:`REFERENCE`; the committed file was made at commit
f6ac716d9ea30eae301c5c527d4744b0e1be1b44 (before issue 53's encoder-from-parts), and
tests/backbones/test_encoder_snapshot.py compares today's builds with it.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

import torch

REFERENCE = Path(__file__).with_name('encoder_snapshot_before.json.gz')
SMALL = 30_000_000  #: parameters; larger names are built seeded at depth 1, or on the meta device only


def keys_digest(pairs: list[list]) -> list:
    """[count, sha1 (16 hex digits)] of the sorted [key, shape] pairs."""
    return [len(pairs), hashlib.sha1(json.dumps(pairs, separators=(',', ':')).encode()).hexdigest()[:16]]


def _keys(model: torch.nn.Module) -> list:
    return keys_digest([[k, list(v.shape)] for k, v in sorted(model.state_dict().items())])


def _sums(tensors) -> list[float]:
    return [float(f"{t.double().sum().item():.7g}") for t in tensors]


def _outputs(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _outputs(out[k])]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _outputs(o)]
    return []


def seeded_overrides(name: str) -> dict | None:
    """The overrides of the name's seeded build: {} for a small name, ``depth=1`` for a larger one whose class takes
    ``depth``, None (no seeded build) otherwise."""
    from zoo.option_types import accepted_options
    from zoo.registry import get_variant
    variant = get_variant(name)
    with torch.device('meta'):
        count = sum(p.numel() for p in variant.build('backbone').parameters())
    if count <= SMALL:
        return {}
    accepted = accepted_options(variant.classes['backbone'])
    return {'depth': 1} if accepted is None or 'depth' in accepted else None


def keys(name: str) -> dict:
    """The digest (:func:`keys_digest`) of the name's state-dict keys with shapes, per class kind ('backbone',
    'classifier'), built on the meta device."""
    from zoo.registry import get_variant
    variant = get_variant(name)
    entry = {}
    for kind in sorted(variant.classes):
        with torch.device('meta'):
            entry[kind] = _keys(variant.build(kind))
    return entry


def seeded(name: str) -> dict | None:
    """The sums of the tensors of the name's seeded backbone and of its outputs on a fixed input (seed 0, batch 1,
    the registered input size); None for a name that is not built seeded (:func:`seeded_overrides`)."""
    from zoo.registry import get_variant
    variant = get_variant(name)
    overrides = seeded_overrides(name)
    if overrides is None:
        return None
    torch.manual_seed(0)
    model = variant.build('backbone', **overrides).eval()
    state = model.state_dict()
    torch.manual_seed(1)
    x = torch.randn(1, getattr(model, 'in_chans', 3), *variant.input_size)
    with torch.no_grad():
        outputs = _outputs(model(x))
    return {'overrides': overrides, 'sums': _sums(state[k] for k in sorted(state)), 'outputs': _sums(outputs),
            'output_abs': _sums(o.abs() for o in outputs)}


def snapshot(name: str) -> dict:
    """:func:`keys` and, under 'seeded', :func:`seeded` of the name."""
    entry = keys(name)
    entry['seeded'] = seeded(name)
    return entry


def load() -> dict:
    """The committed reference: name -> snapshot."""
    return json.loads(gzip.decompress(REFERENCE.read_bytes()))


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from zoo.registry import list_backbones
    torch.set_num_threads(1)
    reference = {name: snapshot(name) for name in list_backbones()}
    REFERENCE.write_bytes(gzip.compress(json.dumps(reference, separators=(',', ':')).encode(), mtime=0))
    print(f"{len(reference)} names written to {REFERENCE}")


if __name__ == '__main__':
    main()
