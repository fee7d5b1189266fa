"""tools/time_tests.py: pytest's summary read into counts, and a timed run appended to the store as a ``ci``
record (a one-test pytest run stands in for the suite: the timing and recording are the same code)."""
import os

import pytest
import time_tests as tool

from lab.records import store


def test_pytest_summaries_are_counted():
    line = '1 failed, 2438 passed, 3 skipped, 16 warnings in 1864.45s (0:31:04)'
    assert tool.counts('noise 5 passed here\n' + line) == {'passed': 2438, 'failed': 1, 'skipped': 3, 'errors': 0}
    assert tool.counts('2 errors in 3.1s') == {'passed': 0, 'failed': 0, 'skipped': 0, 'errors': 2}
    assert tool.counts('no summary') == {'passed': 0, 'failed': 0, 'skipped': 0, 'errors': 0}


@pytest.mark.slow
def test_a_timed_run_is_a_ci_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('ZOO_RECORDS', str(tmp_path))
    monkeypatch.setitem(tool.COMMANDS, 'fast_lane', [*tool.COMMANDS['fast_lane'], '-n', '0',
                                                     'tests/tools/test_time_tests.py::test_pytest_summaries_are_counted'])
    assert tool.main(['fast_lane']) == 0
    [entry] = store.read(tmp_path)
    assert entry['series'] == 'ci' and entry['settings'] == {'what': 'fast_lane'}
    assert entry['metrics']['passed'] == 1 and entry['metrics']['failed'] == 0 and entry['metrics']['exit'] == 0
    assert 0 < entry['metrics']['wall_s'] < 600 and entry['command'] == 'python tools/time_tests.py fast_lane'
    assert '1 passed' in capsys.readouterr().out
    assert os.environ['ZOO_RECORDS'] == str(tmp_path)
