"""Every test that reads real data goes through ``tests/reference.py``'s ``shared_data``, which skips with its reason
where the data is absent (a user's clone has no ``../shared/data``): a test that built the path itself errored
there instead (``street``'s ``next(...glob())``: StopIteration, five errors). A test that only needs a real-looking
picture reads the committed ``tests/samples/`` (``sample_street``)."""
import re
from pathlib import Path

import pytest

from ..reference import SAMPLES, sample_street, shared_data

TESTS = Path(__file__).resolve().parents[1]
#: ways of reaching the shared data without the helper: the folder's path, its variables, the data sets' folders
BYPASS = re.compile(r"""['"]shared['"]\s*/|shared/data|ZOO_DATA|CAMVID_ROOT|shared_data\(\)\s*/""")


def test_no_test_reaches_the_shared_data_but_through_the_helper():
    found = [f'{path.relative_to(TESTS)}:{number}: {line.strip()}'
             for path in sorted(TESTS.rglob('*.py')) if path.name not in ('reference.py', Path(__file__).name)
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if BYPASS.search(line) and not line.lstrip().startswith('#')]
    assert not found, 'use tests/reference.py shared_data(...) (it skips with the reason):\n' + '\n'.join(found)


def test_without_the_data_a_test_is_skipped_saying_what_is_missing_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv('ZOO_DATA', str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match=r'needs Microsoft 7-Scenes .*depth-7scenes/rgb is not available '
                                                    r'.*tools/fetch_datasets\.py DIR --only depth-7scenes'):
        shared_data('depth-7scenes', 'rgb')
    with pytest.raises(TypeError, match='needs the path inside the data folder'):
        shared_data()   # the folder alone exists even where every data set is missing: it could not skip
    (tmp_path / 'camvid').mkdir()
    assert shared_data('camvid') == tmp_path / 'camvid'


def test_the_committed_sample_is_small_and_documented():
    import cv2
    assert sample_street().stat().st_size < 16_000
    assert cv2.imread(str(sample_street())).shape == (180, 240, 3)
    readme = (SAMPLES / 'README.md').read_text()
    assert sample_street().name in readme and 'Licence' in readme and 'Brostow' in readme
    assert {p.name for p in SAMPLES.iterdir()} == {'README.md', sample_street().name}   # each file described
