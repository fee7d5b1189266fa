"""Every registered name builds as it did before the encoder was made of parts (issue 53): the same state-dict keys
and shapes (backbone and classifier, on the meta device), and for a seeded build the same tensors and outputs
(their sums; the larger names at depth 1). The reference was written by tests/reference_data/encoder_snapshot.py
at the commit its docstring names."""
import math
import sys
from pathlib import Path

import pytest

import zoo  # noqa: F401  (registers the families)
from zoo.registry import get_variant, list_backbones

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'reference_data'))
from encoder_snapshot import keys, load, seeded

BEFORE = load()
#: the fast lane compares the keys of one name per family (the first by name), the slow lane every name's
FAMILIES = {get_variant(n).family for n in BEFORE}
FIRST_OF_FAMILY = {min(n for n in BEFORE if get_variant(n).family == f) for f in FAMILIES}
NAMES = [name if name in FIRST_OF_FAMILY else pytest.param(name, marks=pytest.mark.slow) for name in sorted(BEFORE)]


def test_every_registered_name_has_a_reference():
    assert sorted(BEFORE) == list_backbones()


@pytest.mark.parametrize('name', NAMES)
def test_keys_and_shapes_unchanged(name):
    now = keys(name)
    for kind in ('backbone', 'classifier'):
        assert now.get(kind) == BEFORE[name].get(kind), f"{name} {kind}: state-dict keys or shapes changed"


def _close(now: list[float], before: list[float], rel: float) -> bool:
    return len(now) == len(before) and all(math.isclose(a, b, rel_tol=rel, abs_tol=rel) for a, b in zip(now, before))


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(BEFORE))
def test_seeded_weights_and_outputs_unchanged(name):
    before = BEFORE[name].get('seeded')
    now = seeded(name)
    if before is None:
        assert now is None
        return
    assert now['overrides'] == before['overrides']
    assert _close(now['sums'], before['sums'], 1e-5), f"{name}: seeded initial weights changed"
    # a tap's sum of outputs may cancel to ~1e-4 of a sum of magnitudes ~1e5 (normed maps): the float32 rounding of
    # that sum differs between CPUs (AMX / AVX-512 kernels), so it is compared to 1e-6 of the magnitudes' sum
    assert all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6 * m) for a, b, m in
               zip(now['outputs'], before['outputs'], before['output_abs'], strict=True)), f"{name}: outputs changed"
    assert _close(now['output_abs'], before['output_abs'], 1e-4), f"{name}: outputs changed"
