"""lab.records.rows, the one way every measuring tool records: a table row becomes one record (settings from the
row's keys and fixed values, every round of each side, the other numeric values as metrics, numpy's as plain
numbers), a row that measured nothing is no record, and ZOO_RECORDS=off records nothing."""
import numpy as np

from lab.records import rows, store


def test_a_row_becomes_one_record_of_its_cell(tmp_path, monkeypatch):
    monkeypatch.setenv('ZOO_RECORDS', str(tmp_path))
    row = {'model': 'm', 'batch': 2, 'ours_s': np.float32(0.5), 'ratio': 0.9, 'count': np.int64(3), 'ok': True,
           'ours_rounds': [0.4, 0.5, 0.6], 'hf_rounds': [np.float64(1.0), 1.1, 1.2], 'note': 'x', 'rounds': 3}
    written = rows.record_rows('s', [row, {'model': 'refused', 'note': 'no time'}], settings=['model', 'batch'],
                               fixed={'reference': 'transformers'}, rounds={'ours': 'ours_rounds',
                                                                            'reference': 'hf_rounds'},
                               exclude=['rounds'], command='python tools/x.py --y', threads=1)
    assert len(written) == 1  # the refused row measured nothing
    (entry,) = store.read(tmp_path)
    assert entry['settings'] == {'model': 'm', 'batch': 2, 'reference': 'transformers'}
    assert entry['rounds'] == {'ours': [0.4, 0.5, 0.6], 'reference': [1.0, 1.1, 1.2]}
    assert entry['metrics'] == {'ours_s': 0.5, 'ratio': 0.9, 'count': 3}
    assert entry['command'] == 'python tools/x.py --y' and entry['threads'] == 1
    monkeypatch.setenv('ZOO_RECORDS', 'off')
    assert rows.row_record('s', row, settings=['model']) is None and len(store.read(tmp_path)) == 1


def test_commands_and_paths_read_as_typed_in_the_repository():
    assert rows.tool_command('/any/where/tools/benchmark.py', ['--dpt', '--size', 64]) == \
        'python tools/benchmark.py --dpt --size 64'
    assert rows.repo_path(store.ROOT / 'configs' / 'quickstart.py') == 'configs/quickstart.py'
    assert rows.repo_path('/elsewhere/x.py') == '/elsewhere/x.py'
    assert [rows.device_kind(d) for d in ('cuda', 'cuda:1', 'cpu')] == ['cuda', 'cuda', 'cpu']
