"""tools/benchmark_deploy.py: model specs are checked before anything runs, and a tiny model is measured under every
runtime in processes of its own (one table row each; a runtime's failure is a cell, not a crash)."""
import importlib.util
import sys
from pathlib import Path

import pytest

from .records import own_store, series_records

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location('benchmark_deploy', ROOT / 'tools' / 'benchmark_deploy.py')
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def test_model_specs_name_a_known_model_or_give_a_config_and_size():
    assert tool.model_spec('dpt_vitb_512') == ('dpt_vitb_512', 'configs/dpt_vitb_ade20k.py', (512, 512))
    assert tool.model_spec('mine=configs/x.py:64x96') == ('mine', 'configs/x.py', (64, 96))
    with pytest.raises(SystemExit, match='unknown model'):
        tool.model_spec('dpt_vitb_51')
    with pytest.raises(SystemExit, match='HxW'):
        tool.model_spec('mine=configs/x.py:64')


def measured(row: str) -> None:
    """A table row holds a measurement: seconds per call, images per second = batch / seconds, peak resident memory
    at least that before the first call. A cell of text (an error, 'did not finish within ...') is no measurement;
    checking only for 'exit' in the row let a timed-out runtime pass."""
    cells = [cell.strip() for cell in row.split('|')[1:-1]]
    try:
        batch, seconds, img_s, peak, before = int(cells[2]), *(float(c) for c in cells[4:])
    except ValueError:
        raise AssertionError(f'not a measurement: {row}') from None
    assert 0 < seconds < 60 and img_s == pytest.approx(batch / seconds, rel=0.02, abs=0.01), row
    assert peak >= before > 0, row


def test_a_row_that_did_not_finish_is_no_measurement():
    measured('| qs | 64x96 | 2 | onnx | 0.012 | 166.67 | 412 | 380 |')
    for row in ('| qs | 64x96 | 2 | compile | did not finish within 900 s; stopped | | | |',
                '| qs | 64x96 | 2 | onnx | export refused: x | | | |',
                '| qs | 64x96 | 2 | eager | 0.012 | 9.00 | 412 | 380 |'):
        with pytest.raises(AssertionError):
            measured(row)


def test_seconds_are_written_precisely_enough_to_give_the_img_s_cell():
    """0.0127 s written as 0.013 made batch / seconds 153.8 against the 157.7 img/s beside it (a real CI failure)."""
    for seconds in (0.01268, 0.0514, 0.5049, 3.14159, 12.5):
        r = {'seconds': seconds, 'img_s': 2 / seconds, 'peak_rss_mib': 900.0, 'start_rss_mib': 800.0}
        measured(tool.table_row('| qs | 64x96 | 2 | onnx |', r))
    assert tool.table_row('| qs | 64x96 | 2 | onnx |', {'error': 'export refused: x'}).count('|') == 9


@pytest.mark.slow
def test_a_tiny_model_gets_a_row_per_runtime(tmp_path, monkeypatch):
    """... each recorded (series benchmark_deploy) with every timed call and the figures its row printed."""
    folder = own_store(monkeypatch, tmp_path)
    out = tmp_path / 'deploy.md'
    tool.main(['--models', 'qs=configs/quickstart.py:64x96', '--batches', '2', '--repeats', '2', '--threads', '1',
               '--work-dir', str(tmp_path / 'onnx'), '--out', str(out)])
    rows = [line for line in out.read_text().splitlines() if line.startswith('| qs |')]
    assert [row.split('|')[4].strip() for row in rows] == list(tool.RUNTIMES)
    for row in rows:
        measured(row)
    records = series_records(folder, 'benchmark_deploy')
    assert [r['settings'] for r in records] == [{'model': 'qs', 'size': '64x96', 'batch': 2, 'runtime': runtime}
                                                for runtime in tool.RUNTIMES]
    for entry, row in zip(records, rows):
        cells = [c.strip() for c in row.split('|')[5:9]]
        assert len(entry['rounds']['ours']) == 2 and entry['threads'] == 1
        assert cells == [tool.format_value(entry['metrics']['seconds']), f"{entry['metrics']['img_s']:.2f}",
                         f"{entry['metrics']['peak_rss_mib']:.0f}", f"{entry['metrics']['start_rss_mib']:.0f}"]
    assert records[0]['command'].startswith('python tools/benchmark_deploy.py --models qs=')
    assert (tmp_path / 'onnx' / 'qs.onnx').exists() and (tmp_path / 'onnx' / 'qs.int8.onnx').exists()


def test_a_measurement_past_its_timeout_is_a_cell_not_a_wait():
    from lab.benchmark.processes import child_result
    result = child_result([sys.executable, '-c', 'import time; time.sleep(30)'], timeout=0.5)
    assert 'did not finish within' in result['error'] and 'stopped' in result['error']


def test_depth_anything_is_measured_with_the_exportable_position_resampling():
    """The official 'dinov2' resampling is refused for a dynamic-size export, so every runtime of the Depth Anything
    rows runs the same model with the bicubic table (the cost is the same)."""
    from heads.export.limits import inexact_parts
    name, config, _ = tool.model_spec('depth_anything_v2_vits_518')
    model = tool.build_model(name, config)
    assert inexact_parts(model) == []
    from zoo.core.pos_embed import LearnedPosEmbed
    modes = {m.mode for m in model.modules() if isinstance(m, LearnedPosEmbed)}
    assert modes == {'bicubic'}
