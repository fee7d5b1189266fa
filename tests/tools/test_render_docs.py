"""The docs' marked tables are rendered from the committed results store (tools/render_docs.py): the committed docs
equal their rendering, a figure edited by hand and a row with no record are reported, and a cell's figure is the
median over the runs at the current code (min-max, n), a goal judged from that median, never from the best run."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import render_docs

from lab.records import importer, render, store, views

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / 'records'
PAGE = 'docs/benchmarks.md'


def run(series='benchmark.dpt', settings=None, ours=(1.0,), reference=(2.0,), metrics=None, code='new',
        date='2026-12-05T10:00:00+00:00', kind='cpu-x'):
    """One record of one cell, as the store holds it."""
    return {'series': series, 'settings': settings or {'pass': 'forward'}, 'kind': kind, 'date': date, 'code': code,
            'rounds': {'ours': list(ours), 'reference': list(reference)}, 'metrics': metrics or {}, 'threads': 2}


def copy_of_docs(tmp_path: Path) -> Path:
    (tmp_path / 'docs').mkdir()
    shutil.copy(ROOT / PAGE, tmp_path / PAGE)
    return tmp_path / PAGE


def test_the_committed_docs_are_the_rendering_of_the_committed_store():
    problems = render.check(ROOT, store.read(STORE))
    assert problems == [], '\n'.join(problems) + '\nrun `python tools/render_docs.py` and commit the result'
    assert (ROOT / PAGE).read_text().count('<!-- records: table') >= 12


def test_a_figure_edited_by_hand_is_reported_with_its_block(tmp_path, capsys):
    page = copy_of_docs(tmp_path)
    text = page.read_text()
    block = next(b for b in render.BLOCK.finditer(text) if re.search(r'\| \d+\.\d+', b.group('body')))
    row = next(r for r in block.group('body').splitlines() if re.search(r'\| \d+\.\d+', r))
    edited = re.sub(r'(\| \d+\.\d*)(\d)', lambda m: m.group(1) + str((int(m.group(2)) + 1) % 10), row, count=1)
    page.write_text(text.replace(row, edited, 1))                # one digit of one figure, typed over
    assert render_docs.main(['--check', '--root', str(tmp_path), '--records', str(STORE)]) == 1
    err = capsys.readouterr().err
    assert f'{PAGE}:{text.count(chr(10), 0, block.start()) + 1}: the block differs from the store' in err
    assert f'-{edited}\n+{row}\n' in err
    assert page.read_text() != text                              # --check wrote nothing
    assert render_docs.main(['--root', str(tmp_path), '--records', str(STORE)]) == 0
    assert page.read_text() == text                              # rendering puts the store's figure back


def test_a_marked_row_with_no_record_is_reported(tmp_path, capsys):
    page = copy_of_docs(tmp_path)
    text = page.read_text()
    block = next(render.BLOCK.finditer(text))
    keys = re.search(r'rows=(\S+)', block.group('args')).group(1).split(',')
    opening = block.group(1).replace(' -->', ' row=' + ','.join(['no_such'] * len(keys)) + ' -->')
    page.write_text(text.replace(block.group(1), opening, 1))
    assert render_docs.main(['--check', '--root', str(tmp_path), '--records', str(STORE)]) == 1
    err = capsys.readouterr().err
    assert f"{PAGE}:{text.count(chr(10), 0, block.start()) + 1}: no record for " in err
    assert f"'{keys[0]}': 'no_such'" in err
    assert render_docs.main(['--root', str(tmp_path), '--records', str(STORE)]) == 1    # rendered, still reported
    assert '| no_such | ' + ' | '.join(['no_such'] * (len(keys) - 1) + ['no record']) in page.read_text()


def test_a_gpu_row_without_records_reads_not_run_and_is_no_error():
    records = [run(kind='cpu-x')]
    args = {'series': ['benchmark.dpt'], 'kind': ['gpu-y'], 'rows': ['pass'], 'row': ['forward'],
            'columns': ['ratio'], 'missing': ['not run']}
    text, absent = views.table(records, args)
    assert '| forward | not run | 0 |' in text and absent == []
    del args['missing']
    assert views.table(records, args)[1] == ["gpu-y: {'pass': 'forward'}"]


def test_a_cell_is_the_median_of_the_runs_at_the_current_code():
    old = [run(ours=(9.0,), reference=(9.0,), code='old', date='2026-12-01T00:00:00+00:00')]
    new = [run(ours=(1.0, 3.0, 2.0), reference=(4.0,)),            # median 2.0 / 4.0 = 0.5
           run(ours=(3.0,), reference=(4.0, 4.0)),                  # 0.75
           run(ours=(1.0,), reference=(5.0,), date='2026-12-05T11:00:00+00:00')]   # 0.2, the newest
    runs = views.current_runs(old + new)
    assert runs == new
    ratio = views.figure(runs, 'ratio')
    assert (ratio.median, ratio.low, ratio.high, ratio.n) == (0.5, 0.2, 0.75, 3)
    ours = views.figure(runs, 'ours_s')
    assert (ours.median, ours.low, ours.high, ours.n) == (2.0, 1.0, 3.0, 3)
    assert views.cell(ratio, 3) == '0.500 (0.200-0.750)' and views.cell(ratio, 4) == '0.500 (0.200-0.750, n=3)'
    # the newest record's code decides: an old-code run made after the rest makes 'old' the current code
    assert views.current_runs([*new, {**old[0], 'date': '2026-12-06T00:00:00+00:00'}])[0]['code'] == 'old'


def test_the_tool_ratio_wins_and_the_backbone_ratio_is_reference_over_ours():
    backbone = run(series='benchmark.reference', ours=(2.0,), reference=(3.0,))
    assert views.run_value(backbone, 'ratio') == 1.5                          # timm's time / ours
    assert views.run_value(run(ours=(2.0,), reference=(3.0,)), 'ratio') == pytest.approx(2 / 3)   # ours / HF's
    assert views.run_value(run(metrics={'ratio': 0.9}), 'ratio') == 0.9      # the tool's median of paired ratios


def test_a_goal_is_judged_from_the_median_never_the_best_run():
    records = [run(metrics={'ratio': r}) for r in (1.31, 1.06, 1.10)]
    args = {'series': ['benchmark.dpt'], 'kind': ['cpu-x'], 'rows': ['pass'], 'row': ['forward'],
            'columns': ['ratio'], 'goal': ['ratio>=1.2']}
    text, absent = views.table(records, args)
    assert text.splitlines()[-1] == '| forward | 1.10 (1.06-1.31) | 3 | not met |' and absent == []
    assert views.table(records, {**args, 'goal': ['ratio>=1.1']})[0].endswith('| 3 | met |\n')
    with pytest.raises(views.ViewError, match="goal='ratio=>1'"):
        views.table(records, {**args, 'goal': ['ratio=>1']})


def test_the_store_holds_what_the_importer_parses_from_the_docs():
    """The backfill is reproducible from the committed docs: no figure in the store was typed by hand."""
    try:
        importer.git('cat-file', '-e', importer.REVISION)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f'the docs are read at commit {importer.REVISION}, which this checkout lacks (a shallow clone?)')
    records, skipped = importer.import_docs()
    key = lambda r: json.dumps(r, sort_keys=True)   # noqa: E731
    imported = [r for r in store.read(STORE) if 'imported_from' in r]
    assert sorted(map(key, records)) == sorted(map(key, imported))
    assert any('upernet_cpu_intel_xeon.md' in line for line in skipped)


@pytest.mark.parametrize('kind, settings, ratios, source', [
    ('cpu-amd-epyc-avx2-2c', {'model': 'levit_256'}, {1.31, 1.169}, 'speed_goals_amd_epyc_avx2.md'),
    ('cpu-amd-epyc-avx2-2c', {'model': 'vits', 'batch': 8}, {0.781, 0.835}, 'quiet_rerun_2026-12-04_amd_epyc_avx2.md'),
    ('cpu-amd-epyc-avx512-2c', {'pass': 'train_step', 'size': '512x512'}, {0.656, 0.914}, 'malloc_cpu_amd_epyc.md'),
])
def test_both_sides_of_each_contradiction_are_records_with_their_command(kind, settings, ratios, source):
    found = [r for r in store.read(STORE, kinds=[kind]) if settings.items() <= r['settings'].items()]
    assert ratios <= {r['metrics']['ratio'] for r in found}
    assert all(r['command'].startswith('python ') and r['imported_from'].startswith('docs/benchmarks') for r in found)
    assert any(r['imported_from'].endswith(source) for r in found)


def test_a_block_that_cannot_be_rendered_is_named_with_its_file_and_line(tmp_path):
    (tmp_path / 'docs').mkdir()
    (tmp_path / PAGE).write_text('# x\n\n<!-- records: table series=s kind=k rows=pass row=forward -->\n'
                                 '<!-- /records -->\n')
    with pytest.raises(views.ViewError, match=rf"{PAGE}:3: a table needs columns=\.\.\."):
        render_docs.main(['--check', '--root', str(tmp_path), '--records', str(STORE)])


def test_the_backfill_refuses_to_import_twice(tmp_path, capsys):
    import import_benchmark_docs
    store.append(run(kind='cpu-x') | {'imported_from': PAGE}, tmp_path)
    with pytest.raises(SystemExit):
        import_benchmark_docs.main(['--records', str(tmp_path)])
    assert 'already holds imported records' in capsys.readouterr().err
    assert len(store.read(tmp_path)) == 1
