"""Issue 51: a run never writes over another run's files in its work dir. A second ``tools/train.py`` run into
the same work dir without ``--resume`` stops before building anything (``--restart`` moves the earlier run aside),
and ``--resume`` moves aside only checkpoints (by name or content), never a user's other files
(docs/reliability.md, "Faults")."""
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from heads.engine.checkpoints.earlier_run import WorkDirInUseError, check_earlier_run
from heads.engine.checkpoints.resume_search import checkpoint_files, latest_complete_checkpoint

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


# ------------------------------------------------------------------------------- 2: a second run into the work dir
@pytest.mark.slow
def test_a_second_run_into_the_same_work_dir_stops_before_writing_over_the_first(first_run, tmp_path):
    """The everyday re-run into work_dirs/<name> with another learning rate and no --resume (before: iter_*.pth,
    predictions and the dumped config written over, exit 0)."""
    work_dir = copy_run(first_run, tmp_path / 'run')
    before = files_of(work_dir)
    with pytest.raises(WorkDirInUseError, match=r"work dir .*run holds checkpoints of an earlier run \(iter_1\.pth, "
                                                r"iter_2\.pth\).*Nothing was changed.*--resume.*--work-dir DIR.*"
                                                r"--restart \(moves the earlier run's files into .*previous_<time>"):
        train_tool.main(quick(work_dir, 2, 'optim_wrapper.optimizer.lr=0.01'))
    assert files_of(work_dir) == before


@pytest.mark.slow
def test_the_tool_exits_with_the_message_and_changes_nothing(first_run, tmp_path):
    work_dir = copy_run(first_run, tmp_path / 'run')
    before = files_of(work_dir)
    done = subprocess.run([sys.executable, 'tools/train.py', *quick(work_dir, 2, 'optim_wrapper.optimizer.lr=0.01')],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and 'Traceback' not in done.stderr, done.stderr[-2000:]
    expected = f'error: WorkDirInUseError: work dir {work_dir} holds checkpoints of an earlier run'
    assert done.stderr.startswith(expected), done.stderr
    assert files_of(work_dir) == before


@pytest.mark.slow
def test_restart_moves_the_earlier_run_aside_and_trains_from_the_start(first_run, tmp_path, capsys):
    work_dir = copy_run(first_run, tmp_path / 'run')
    before = files_of(work_dir)
    with pytest.raises(SystemExit):  # one or the other
        train_tool.main(quick(work_dir, 1, '--restart') + ['--resume'])
    runner = train_tool.main(quick(work_dir, 1) + ['--restart'])
    assert runner.iter == 1
    previous = [p for p in work_dir.iterdir() if p.name.startswith('previous_')]
    assert len(previous) == 1 and previous[0].is_dir()
    moved = files_of(previous[0])
    assert moved.keys() == before.keys()  # every file of the earlier run, logs and config included
    assert all(moved[name] == data for name, data in before.items() if name != 'last_checkpoint')
    assert (previous[0] / 'last_checkpoint').read_text() == str(previous[0] / 'iter_2.pth')  # not the new run's
    assert (work_dir / 'iter_1.pth').is_file() and not (work_dir / 'iter_2.pth').exists()
    assert f"--restart: moved the earlier run's files of {work_dir} (" in capsys.readouterr().out
    assert latest_complete_checkpoint(previous[0]) == previous[0] / 'iter_2.pth'  # the earlier run resumes there


def test_restart_keeps_earlier_moves_and_names_a_new_folder(tmp_path):
    """Without training: the check and the move on a work dir of checkpoint files."""
    for step in (1, 2):
        torch.save({'meta': {'iter': step}, 'state_dict': {'w': torch.ones(1)}}, tmp_path / f'iter_{step}.pth')
    (tmp_path / 'cfg.py').write_text('x = 1\n')
    with pytest.raises(WorkDirInUseError, match=r'\(iter_1\.pth, iter_2\.pth\)'):
        check_earlier_run(tmp_path)
    said = check_earlier_run(tmp_path, restart=True)
    first = next(tmp_path.glob('previous_*'))
    assert f"(cfg.py, iter_1.pth, iter_2.pth) into {first}/" in said
    torch.save({'meta': {'iter': 1}}, tmp_path / 'iter_1.pth')
    check_earlier_run(tmp_path, restart=True)
    folders = sorted(tmp_path.iterdir())
    assert len(folders) == 2 and first in folders and all(p.name.startswith('previous_') for p in folders)
    assert sorted(p.name for p in first.iterdir()) == ['cfg.py', 'iter_1.pth', 'iter_2.pth']  # left as moved


def test_a_work_dir_without_checkpoints_is_trained_into(tmp_path):
    """Logs of a run that stopped before its first checkpoint, a user's files, weights only: nothing to refuse."""
    (tmp_path / '20261205_090000').mkdir()
    users_files(tmp_path)
    assert check_earlier_run(tmp_path) is None
    (tmp_path / 'iter_3.pth').write_bytes(b'cut short')  # the run's name, unreadable: it would be written over
    with pytest.raises(WorkDirInUseError, match=r'\(iter_3\.pth\)'):
        check_earlier_run(tmp_path)


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
