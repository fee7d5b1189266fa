"""Issue 20, checkpoints: what a kill, a full disk, a damaged or foreign file, a URL or a checkpoint of another
model does to training through tools/train.py, and what is kept (docs/reliability.md, "Faults")."""
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from heads.engine.config.check import ConfigKeyError
from heads.engine.runner import DiskFullError, latest_complete_checkpoint
from zoo.weights import CheckpointMismatchError, CorruptCheckpointError, NotACheckpointError, RemoteCheckpointError
from zoo.weights.checksum import checksum_mismatch, sidecar

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402


def quick(work_dir, iters, *extra, every=1, keep=-1):
    """The quickstart cut to ``iters`` iterations of 2 images, a checkpoint every ``every``, ``keep`` kept."""
    return ['configs/quickstart.py', '--work-dir', str(work_dir), '--cfg-options', f'train_cfg.max_iters={iters}',
            f'train_cfg.val_interval={max(iters, 1)}', f'default_hooks.checkpoint.interval={every}',
            f'default_hooks.checkpoint.max_keep_ckpts={keep}', 'train_dataloader.batch_size=2',
            'train_dataloader.dataset.num_samples=4', 'val_dataloader.dataset.num_samples=2', *extra]


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A real 2-iteration run: iter_1.pth and iter_2.pth with their checksums, last_checkpoint naming iter_2."""
    work_dir = tmp_path_factory.mktemp('trained')
    os.chdir(ROOT)
    train_tool.main(quick(work_dir, 2))
    return work_dir


def copy_run(trained: Path, to: Path) -> Path:
    shutil.copytree(trained, to, ignore=shutil.ignore_patterns('2*'))  # without the logs' timestamped folders
    (to / 'last_checkpoint').write_text(str(to / 'iter_2.pth'))  # as the run would have written it there
    return to


# ------------------------------------------------------------------------------------------ 2: max_keep_ckpts=1
@pytest.mark.slow
def test_a_kill_while_writing_keeps_the_only_older_checkpoint(tmp_path):
    """max_keep_ckpts=1 and a SIGKILL halfway through writing iter_2: iter_1 must still be there (mmengine deletes
    it before writing the new one), and --resume continues from it."""
    args = quick(tmp_path, 2, keep=1)
    killed = subprocess.run([sys.executable, 'tests/kill_switch.py', 'mid-write', 'iter_2.pth', *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (tmp_path / 'iter_2.pth.partial').is_file() and not (tmp_path / 'iter_2.pth').exists()
    assert latest_complete_checkpoint(tmp_path) == tmp_path / 'iter_1.pth'
    runner = train_tool.main(args + ['--resume'])
    assert runner.iter == 2
    assert sorted(p.name for p in tmp_path.glob('iter_*')) == ['iter_2.pth', 'iter_2.pth.sha256']  # keep=1, no .partial


# ------------------------------------------------------------------------------------------ 3: load_from must fit
@pytest.mark.slow
@pytest.mark.parametrize('change, named', [
    ('model.decode_head.num_classes=5', r'decode_head\.head\.4\.weight \(4, 64, 1, 1\) vs model \(5, 64, 1, 1\)'),
    ('model.backbone.mlp_ratio=2.0', r'backbone\.blocks\.0\.mlp\.fc1\.weight')])
def test_load_from_a_checkpoint_of_another_model_stops_naming_the_keys(trained, tmp_path, change, named):
    run = tmp_path / 'run'
    with pytest.raises(CheckpointMismatchError, match=rf"load_from: checkpoint .*iter_2\.pth .*does not fit "
                                                      rf"Segmentor:(.|\n)*{named}(.|\n)*load_from_partial=True"):
        train_tool.main(quick(run, 2, f"load_from={trained / 'iter_2.pth'}", change))
    assert not list(run.glob('*.pth'))  # stopped before training


@pytest.mark.slow
def test_load_from_partial_loads_what_fits_when_asked(trained, tmp_path):
    runner = train_tool.main(quick(tmp_path, 1, f"load_from={trained / 'iter_2.pth'}",  # lr 0: the step changes nothing
                                   'model.decode_head.num_classes=5', 'load_from_partial=True',
                                   'optim_wrapper.optimizer.lr=0'))
    saved = torch.load(trained / 'iter_2.pth', weights_only=True)['state_dict']
    model = runner.model.state_dict()
    assert torch.equal(model['backbone.blocks.0.attn.qkv.weight'], saved['backbone.blocks.0.attn.qkv.weight'])
    assert model['decode_head.head.4.weight'].shape[0] == 5  # left at its initialisation


# ------------------------------------------------------------------------------------------ 7: URLs are refused
@pytest.mark.slow
@pytest.mark.parametrize('option', ['load_from', 'resume'])
def test_remote_checkpoint_paths_are_refused_not_downloaded(tmp_path, option):
    url = 's3://bucket/run/iter_2.pth'
    extra = [f'load_from={url}'] if option == 'load_from' else []
    resume = ['--resume', url] if option == 'resume' else []
    with pytest.raises(RemoteCheckpointError, match=r"refusing to read s3://bucket/run/iter_2\.pth: remote "
                                                    r"checkpoints are not downloaded at run time"):
        train_tool.main(quick(tmp_path, 1, *extra) + resume)
    for remote in ('https://example.org/w.pth', 'open-mmlab://vit/vit_base.pth'):  # mmcv's model-zoo scheme too
        with pytest.raises(RemoteCheckpointError, match=f'refusing to read {re.escape(remote)}: remote'):
            zoo.create_backbone('vit_tiny_patch16_224', depth=1, pretrained=remote)


def test_mmengine_pretrained_initialisation_is_refused_before_building(tmp_path):
    """init_cfg=dict(type='Pretrained') would read (and download) with mmengine's loader."""
    with pytest.raises(ConfigKeyError, match=r"config key model\.init_cfg\.type: 'Pretrained' initialisation reads "
                                             r"'https://example\.org/w\.pth' with mmengine's loader.*load_from="):
        train_tool.main(quick(tmp_path, 1, "model.init_cfg.type=Pretrained",
                              "model.init_cfg.checkpoint=https://example.org/w.pth"))
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------ 8: not a checkpoint
def _write(path: Path, kind: str) -> Path:
    if kind == 'text':
        path.write_text('model weights: see the README\n')
    elif kind == 'pickled list':
        path.write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    elif kind == 'saved list':
        torch.save([torch.zeros(2)], path)
    elif kind == 'random bytes':
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif kind == 'npy':
        with open(path, 'wb') as f:
            np.save(f, np.zeros(3))
    elif kind == 'int keys':
        torch.save({101: torch.zeros(2)}, path)
    return path


@pytest.mark.parametrize('kind, found', [
    ('text', r"it is text starting 'model weights"), ('pickled list', r'it is a Python pickle \(protocol 2\)'),
    ('saved list', r'it holds a list of 1 items'), ('random bytes', r'it is 4096 bytes of unrecognised binary'),
    ('npy', r'it is a NumPy array \(\.npy\)'), ('int keys', r'keyed by ints such as 101')])
def test_files_that_are_not_checkpoints_say_so_and_what_they_are(tmp_path, kind, found):
    path = _write(tmp_path / 'weights.pth', kind)
    with pytest.raises(NotACheckpointError, match=rf"weights\.pth (is not (a|a readable) checkpoint|is not a "
                                                  rf"state dict)(.|\n)*{found}") as err:
        zoo.create_backbone('vit_tiny_patch16_224', depth=1, pretrained=path)
    assert 'arbitrary code' not in str(err.value)


@pytest.mark.slow
def test_load_from_a_text_file_says_it_is_not_a_checkpoint(tmp_path):
    path = _write(tmp_path / 'notes.pth', 'text')
    with pytest.raises(NotACheckpointError, match=r'notes\.pth is not a checkpoint: it is text'):
        train_tool.main(quick(tmp_path / 'run', 1, f'load_from={path}'))


# ------------------------------------------------------------------------------------------ 9: newest complete
@pytest.mark.slow
def test_resume_falls_back_past_a_newest_checkpoint_damaged_in_the_middle(trained, tmp_path):
    work_dir = copy_run(trained, tmp_path / 'run')
    newest = work_dir / 'iter_2.pth'
    data = bytearray(newest.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)  # still unzips and loads: only the checksum tells
    newest.write_bytes(bytes(data))
    assert latest_complete_checkpoint(work_dir) == work_dir / 'iter_1.pth'
    with pytest.raises(CorruptCheckpointError, match=r'iter_2\.pth is damaged: its SHA-256'):
        train_tool.main(quick(tmp_path / 'other', 2) + ['--resume', str(newest)])
    runner = train_tool.main(quick(work_dir, 2) + ['--resume'])
    assert runner.iter == 2 and checksum_mismatch(newest) is None  # iteration 2 trained again from iter_1
    assert (work_dir / 'iter_2.pth.damaged').read_bytes() == bytes(data)  # kept aside, not overwritten


def test_resume_takes_a_newer_complete_checkpoint_than_last_checkpoint_names(trained, tmp_path):
    """A kill between the rename of iter_2.pth and mmengine's update of last_checkpoint leaves this state."""
    work_dir = copy_run(trained, tmp_path / 'run')
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'iter_1.pth'))
    assert latest_complete_checkpoint(work_dir) == work_dir / 'iter_2.pth'
    sidecar(work_dir / 'iter_2.pth').unlink()  # killed before its checksum was written: judged by reading it
    assert latest_complete_checkpoint(work_dir) == work_dir / 'iter_2.pth'


# ------------------------------------------------------------------------------------------ 10: disk full
@pytest.mark.slow
def test_disk_full_removes_the_partial_and_says_what_is_kept(tmp_path):
    """The kernel's /dev/full answers every write with ENOSPC: the second checkpoint's .partial points there."""
    if not os.access('/dev/full', os.W_OK):
        pytest.skip('no /dev/full on this system')
    (tmp_path / 'iter_2.pth.partial').symlink_to('/dev/full')
    with pytest.raises(DiskFullError, match=r"disk full: .* while writing checkpoint iter_2\.pth; removed its "
                                            r"incomplete iter_2\.pth\.partial, kept: .*iter_1\.pth"):
        train_tool.main(quick(tmp_path, 2))
    assert not list(tmp_path.glob('*.partial*'))
    assert latest_complete_checkpoint(tmp_path) == tmp_path / 'iter_1.pth'
    runner = train_tool.main(quick(tmp_path, 2) + ['--resume'])  # space again: continues from iter_1
    assert runner.iter == 2 and checksum_mismatch(tmp_path / 'iter_2.pth') is None


@pytest.mark.slow
def test_the_time_spent_writing_a_checkpoint_is_not_counted_as_the_next_iteration(tmp_path):
    """mmengine 0.10 never calls ``after_save_checkpoint``, where EtaTimerHook restarts its clock: a slow checkpoint
    write (here a hook that takes 2 s before each save) was counted as the next iteration's time (as its wait for
    data), and the ETA with it. ZooRunner calls the point after every write."""
    import time

    from mmengine.hooks import Hook

    from heads.engine import ZooRunner
    from heads.engine.launch import load_config

    class SlowDisk(Hook):
        def before_save_checkpoint(self, runner, checkpoint):
            time.sleep(2.0)

    args = quick(tmp_path, 2)
    overrides = dict(item.split('=', 1) for item in args[args.index('--cfg-options') + 1:])
    cfg = load_config(args[0], {k: int(v) for k, v in overrides.items()}, str(tmp_path), None)
    runner = ZooRunner.from_cfg(cfg)
    runner.register_hook(SlowDisk())
    runner.train()
    waits = runner.message_hub.get_scalar('train/data_time').data[0]  # from the previous iteration's end
    assert len(waits) == 2 and waits[1] < 2.0, waits
