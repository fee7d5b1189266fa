"""tools/benchmark_tiling.py on a small image: a table row per pass, each recorded (series benchmark_tiling) with
its settings and the figures its row printed."""
import importlib.util
from pathlib import Path

import pytest

from ..reference import shared_data
from .records import own_store, series_records

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location('benchmark_tiling', ROOT / 'tools' / 'benchmark_tiling.py')
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


@pytest.mark.slow
def test_each_pass_is_a_row_and_a_record(tmp_path, monkeypatch, capsys):
    folder = own_store(monkeypatch, tmp_path)
    image = shared_data('depth-7scenes') / 'rgb' / 'frame-000000.jpg'
    tool.main(['--image', str(image), '--size', '280', '210', '--tile', '140', '140', '--overlap', '28',
               '--single', '140', '112', '--threads', '1'])
    rows = [[c.strip() for c in line.split('|')[1:-1]] for line in capsys.readouterr().out.splitlines()
            if line.startswith('| single') or line.startswith('| tiled')]
    assert [(r[0], r[1]) for r in rows] == [('single', '140 x 112'), ('tiled', '140 x 112'), ('tiled', '280 x 210')]
    records = series_records(folder, 'benchmark_tiling')
    tiles = {'tile': '140x140', 'overlap': 28}
    assert [r['settings'] for r in records] == [
        {'model': 'depth_anything_v2_vits', 'pass': 'single', 'size': '140x112'},
        {'model': 'depth_anything_v2_vits', 'pass': 'tiled', 'size': '140x112', **tiles},
        {'model': 'depth_anything_v2_vits', 'pass': 'tiled', 'size': '280x210', **tiles}]
    for entry, row in zip(records, rows):
        m = entry['metrics']
        assert entry['rounds']['ours'] == [m['seconds']] and entry['threads'] == 1
        assert row[3:6] == [f"{m['seconds']:.1f}", f"{m['peak_rss_mib']:.0f}", f"{m['start_rss_mib']:.0f}"]
    assert f"{records[1]['metrics']['gap_to_single']:.3f}" == rows[1][6]
