"""Issue 51: a run never writes over another run's files in its work dir. A second ``tools/train.py`` run into
the same work dir without ``--resume`` stops before building anything (``--restart`` moves the earlier run aside),
and ``--resume`` moves aside only checkpoints (by name or content), never a user's other files
(docs/reliability.md, "Faults")."""
import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import torch

from heads.engine.checkpoints.resume_search import checkpoint_files

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402


def quick(work_dir, iters, *extra):
    """The quickstart cut to ``iters`` iterations of 2 images, a checkpoint at each."""
    return ['configs/quickstart.py', '--work-dir', str(work_dir), '--cfg-options', f'train_cfg.max_iters={iters}',
            f'train_cfg.val_interval={iters}', 'default_hooks.checkpoint.interval=1',
            'train_dataloader.batch_size=2', 'train_dataloader.dataset.num_samples=4',
            'val_dataloader.dataset.num_samples=2', *extra]


def files_of(folder: Path) -> dict:
    """Every file under ``folder`` (relative name: bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob('*')) if p.is_file()}


def a_tar(path: Path) -> Path:
    """A real tar archive of one small file (a user's evaluation images, say)."""
    with tarfile.open(path, 'w') as tar:
        data = b'\x89PNG not really an image'
        info = tarfile.TarInfo('images/0001.png')
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def users_files(folder: Path) -> dict:
    """Files of a user in a work dir whose names end like checkpoints but are none (read as they are)."""
    a_tar(folder / 'my_eval_images.tar')
    (folder / 'notes.bin').write_bytes(os.urandom(3000))
    torch.save({'w': torch.ones(2)}, folder / 'teacher_weights.pt')  # a flat weights file: no checkpoint record
    (folder / 'archive.zip').write_bytes(b'PK\x03\x04' + os.urandom(200))  # a zip torch cannot read
    return {name: (folder / name).read_bytes()
            for name in ('my_eval_images.tar', 'notes.bin', 'teacher_weights.pt', 'archive.zip')}


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope='module')
def first_run(tmp_path_factory):
    """A real 2-iteration run: iter_1.pth, iter_2.pth, their checksums, last_checkpoint, config, predictions."""
    work_dir = tmp_path_factory.mktemp('first')
    os.chdir(ROOT)
    train_tool.main(quick(work_dir, 2))
    return work_dir


def copy_run(first_run: Path, to: Path) -> Path:
    shutil.copytree(first_run, to)
    (to / 'last_checkpoint').write_text(str(to / 'iter_2.pth'))  # as the run would have written it there
    return to


# ------------------------------------------------------------------------------- 5: --resume and a user's files
def test_checkpoints_are_found_by_name_or_content_not_by_suffix(tmp_path):
    users_files(tmp_path)
    torch.save({'meta': {'iter': 3}, 'state_dict': {'w': torch.ones(1)}}, tmp_path / 'backup.pth')  # by content
    torch.save({'state_dict': {'w': torch.ones(1)}}, tmp_path / 'weights_only.ckpt')  # by content
    (tmp_path / 'iter_4.pth').write_bytes(b'cut short')  # by name
    (tmp_path / 'renamed').write_bytes((tmp_path / 'backup.pth').read_bytes())  # by content, whatever its name
    passed = []
    found = checkpoint_files(tmp_path, passed=passed)
    assert sorted(p.name for p in found) == ['backup.pth', 'iter_4.pth', 'renamed', 'weights_only.ckpt']
    assert sorted(p.name for p in passed) == ['my_eval_images.tar', 'notes.bin', 'teacher_weights.pt']  # by suffix


@pytest.mark.slow
def test_resume_leaves_files_that_are_not_checkpoints_alone(first_run, tmp_path):
    """A tar of images, notes, a flat weights file and a zip in the work dir (before: moved aside as NAME.damaged,
    being '.tar'/'.bin'/'.pt' files no checkpoint reader could read)."""
    work_dir = copy_run(first_run, tmp_path / 'run')
    mine = users_files(work_dir)
    runner = train_tool.main(quick(work_dir, 3) + ['--resume'])
    assert runner.iter == 3 and Path(runner._load_from) == work_dir / 'iter_2.pth'
    assert {name: (work_dir / name).read_bytes() for name in mine} == mine
    assert not list(work_dir.glob('*.damaged*'))
    log = '\n'.join(p.read_text() for p in sorted(work_dir.glob('2*/*.log')))
    assert ('--resume: not checkpoints by name or content, left as they are: my_eval_images.tar, notes.bin, '
            'teacher_weights.pt') in log
