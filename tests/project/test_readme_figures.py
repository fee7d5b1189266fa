"""The training figures of docs/training.md (README's until the docs site) are those of a committed run or of the
tests that make them: the quickstart's mIoU, iterations and console line count against the committed console output
it cites, and the short-run tables' rows against tools/short_runs.py (their figures are rendered from the store)."""
import re
from pathlib import Path

from mmengine.config import Config

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / 'docs' / 'training.md').read_text()  # the figures and the short-run table moved here


def test_the_quickstart_caption_is_the_committed_run():
    caption = README[README.index('![quickstart predictions]'):].split('\n\n')[1].replace('\n', ' ')
    cited = re.search(r'`(docs/benchmarks/quickstart_[\w.]+\.txt)`', caption)
    assert cited, caption
    output = (ROOT / cited[1]).read_text()
    console = [line for line in output.splitlines() if not line.startswith('#')]
    miou = re.findall(r'mIoU: ([\d.]+)', output)[-1]
    assert f'validation mIoU {float(miou):.2f}' in caption, (miou, caption)
    iters = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py')).train_cfg.max_iters
    assert f'({iters} iterations;' in caption and any(f'[{iters}/{iters}]' in line for line in console)
    assert f'console output is {len(console)} lines' in caption
    assert 'OMP_NUM_THREADS=2 python tools/train.py configs/quickstart.py' in output


def test_the_short_run_tables_have_a_row_per_run_of_the_tool():
    """docs/training.md's short-run tables (rendered from the store by tools/render_docs.py) list every run of
    tools/short_runs.py, the one definition tests/training/test_training.py trains too, with its iterations."""
    import short_runs
    blocks = re.findall(r'<!-- records: table series=short_run (.*?)-->', README, re.S)
    rows = [tuple(row.split(',')) for block in blocks for row in re.findall(r'row=(\S+)', block)]
    assert sorted(rows) == sorted((name, str(run.iters)) for name, run in short_runs.RUNS.items())


def test_the_detection_page_gives_the_ci_test_s_iterations_or_none():
    """docs/detection.md said CI's detection run was 600 iterations while the test ran 360: a count written beside
    the test's name must be the test's ``ITERS``."""
    from ..training import test_detection_training
    text = ' '.join((ROOT / 'docs' / 'detection.md').read_text().split())
    sentence = text[text.index('`tests/training/test_detection_training.py`'):].split('. ')[0]
    stated = re.findall(r'(\d+)-iteration', sentence)
    assert all(int(n) == test_detection_training.ITERS for n in stated), (stated, sentence)
