"""The test run's controller writes yapf's grammar cache before pytest-xdist starts its workers (tests/conftest.py):
two workers importing mmengine (and so yapf) at once in a fresh environment could read the cache while the other
was writing it (CI, 2026-12-05: 'EOFError: Ran out of input')."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CONFIGURE = f'''
import sys, types
sys.path.insert(0, {str(TESTS)!r})
import conftest
conftest.pytest_configure(types.SimpleNamespace())  # the controller's config: no ``workerinput``
'''


@pytest.mark.slow  # a fresh interpreter importing torch and mmengine: ~1.7 s
def test_the_controller_writes_yapfs_grammar_cache_before_the_workers_start(tmp_path):
    env = {**os.environ, 'XDG_CACHE_HOME': str(tmp_path)}  # an empty cache, as in a fresh environment
    subprocess.run([sys.executable, '-c', CONFIGURE], env=env, check=True, timeout=300)
    pickles = sorted(tmp_path.rglob('*.pickle'))
    assert [p.name.split('-py')[0] for p in pickles] == ['Grammar', 'PatternGrammar'], pickles
    assert all(p.stat().st_size > 0 for p in pickles)
