"""The training figures of docs/training.md (README's until the docs site) are those of a committed run or of the
tests that make them: the quickstart's mIoU, iterations and console line count against the committed console output
it cites, and the short-run table's iteration counts against tests/training/test_training.py."""
import inspect
import re
from pathlib import Path

from mmengine.config import Config

from ..training import test_training

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


def readme_iterations(row_start: str) -> int:
    row = next(line for line in README.splitlines() if line.startswith(row_start))
    return int(re.search(r'\| (\d+) iter', row)[1])


def test_the_short_run_table_has_the_tests_iterations():
    camvid = test_training.test_camvid_short_run_beats_the_majority_class.pytestmark[0]
    tested = dict(zip(camvid.kwargs['ids'], (iters for _, iters in camvid.args[1])))
    rows = {'vit': '| CamVid, `configs/dpt_vitb_camvid.py` shrunk, ViT-Ti', 'cvt': '| same, CvT-13',
            'coatnet': '| same, CoAtNet', 'crossvit': '| same, CrossViT', 'clip': '| same, CLIP',
            'siglip': '| same, SigLIP', 'dinov3': '| same, DINOv3', 'eva02': '| same, EVA-02',
            'pe': '| same, Perception Encoder', 'aimv2': '| same, AIMv2', 'radio': '| same, C-RADIOv3',
            'internvit': '| same, InternViT-300M', 'naflex': '| same, NaFlex'}
    assert {name: readme_iterations(rows[name]) for name in tested} == tested
    depth = re.search(r"'train_cfg\.max_iters=(\d+)'",
                      inspect.getsource(test_training.test_seven_scenes_short_run_beats_predicting_the_mean_depth))
    assert readme_iterations('| 7-Scenes depth') == int(depth[1])


def test_the_detection_page_gives_the_ci_test_s_iterations_or_none():
    """docs/detection.md said CI's detection run was 600 iterations while the test ran 360: a count written beside
    the test's name must be the test's ``ITERS``."""
    from ..training import test_detection_training
    text = ' '.join((ROOT / 'docs' / 'detection.md').read_text().split())
    sentence = text[text.index('`tests/training/test_detection_training.py`'):].split('. ')[0]
    stated = re.findall(r'(\d+)-iteration', sentence)
    assert all(int(n) == test_detection_training.ITERS for n in stated), (stated, sentence)
