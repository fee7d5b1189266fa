"""Test-wide set-up: the tools write their records to a temporary store (``ZOO_RECORDS``), every test starts from
seed 0, each of pytest-xdist's worker processes computes with its share of the cores (two workers with all cores each
would run twice as many threads as cores, which slows both far more than 2x), and the files of long runs are
collected first so that the workers start on them and fill in with short files (longest first balances them),
and the controller writes yapf's grammar cache before it starts the workers (see ``pytest_configure``)."""
import os
from pathlib import Path

WORKERS = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
if WORKERS > 1:  # before torch starts its thread pool; the tools' subprocesses inherit it
    os.environ['OMP_NUM_THREADS'] = str(max(1, len(os.sched_getaffinity(0)) // WORKERS))

import pytest  # noqa: E402
import torch  # noqa: E402

if WORKERS > 1:
    torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))

# The measuring tools append records to the repository's results store (records/); the tests' runs of them go to a
# folder of this session's instead (inherited by the tools' subprocesses), so that no test writes into the store.
if 'ZOO_RECORDS' not in os.environ or Path(os.environ['ZOO_RECORDS']).resolve() == \
        Path(__file__).resolve().parents[1] / 'records':
    import tempfile
    os.environ['ZOO_RECORDS'] = tempfile.mkdtemp(prefix='zoo-records-')


def pytest_configure(config):
    """In pytest-xdist's controller, before it starts the workers: import mmengine, whose config module imports yapf,
    which on its first import in a fresh environment writes its grammar tables to a pickle in the user's cache
    (~/.cache/YAPF/<version>/). yapf renames the pickle into place before closing it, so a second process importing
    yapf at that moment reads an empty file: CI's fresh venv, two workers collecting at once, failed so with
    'EOFError: Ran out of input' in tests/backbones/test_clip.py (2026-12-05). Once the controller has written the
    cache, the workers only read it."""
    if not hasattr(config, 'workerinput'):  # workers carry ``workerinput``; the controller and ``-n 0`` do not
        import mmengine  # noqa: F401


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


#: Files whose tests train for minutes (seconds with one thread on an AVX2 EPYC, 2026-12-02): test_training 935,
#: test_detection_training 310, test_docs_snippets 150, test_resume_after_kill 135, test_fsdp 100,
#: test_classification 100, test_distributed 90, test_gpu_check 87; test_every_config about 165 (2026-12-02, Xeon);
#: the ONNX exports of test_export_every_family (about 9 min: Swin-T 116 s, CoAtNet-0 59 + 25 s, CrossViT-Ti 51 + 50 s)
#: and test_export_families (about 5 min; both two workers on the AVX-512 EPYC, 2026-12-05); Video Depth Anything's
#: clip export about 50 s (AMX Xeon, 2026-12-06). Every other file takes under a minute.
LONG_FIRST = ('test_training.py', 'test_export_every_family.py', 'test_detection_training.py',
              'test_export_families.py', 'test_export_video_depth_anything.py', 'test_every_config.py',
              'test_docs_snippets.py', 'test_resume_after_kill.py', 'test_fsdp.py', 'test_classification.py',
              'test_distributed.py', 'test_gpu_check.py')


def pytest_collection_modifyitems(items):
    rank = {name: k for k, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))  # stable: the rest keep their order
