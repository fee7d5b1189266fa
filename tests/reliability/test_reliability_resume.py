"""Issue 36, resume and checkpoint safety: what ``--resume`` does with a work dir of custom-named, empty, damaged
or unverifiable checkpoints, what a resumed run reads from the checkpoint (generator state, kernel choice), and the
config values a run refuses before training (docs/reliability.md, "Faults")."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from heads.engine.checkpoints.resume_search import NoCompleteCheckpointError, latest_complete_checkpoint
from heads.engine.checkpoints.rng_state import RngStateError
from heads.engine.config.values import ConfigValueError
from zoo.weights import CorruptCheckpointError
from zoo.weights.checksum import checksum_mismatch, sidecar
from zoo.weights.io import read_file

from .test_reliability_checkpoints import ROOT, _in_project_root, copy_run, quick, train_tool  # noqa: F401

TEMPLATE = 'ckpt_{}.pth'


def custom(work_dir, iters, *extra, keep=-1):
    """:func:`quick` with checkpoints named ``ckpt_N.pth``."""
    return quick(work_dir, iters, f'default_hooks.checkpoint.filename_tmpl={TEMPLATE}', *extra, keep=keep)


@pytest.fixture(scope='module')
def trained_custom(tmp_path_factory):
    """A real 3-iteration run writing ckpt_1..3.pth with their checksums."""
    work_dir = tmp_path_factory.mktemp('custom')
    os.chdir(ROOT)
    train_tool.main(custom(work_dir, 3))
    return work_dir


def damage_middle(path: Path) -> None:
    """Zero 64 bytes in the middle: the file still unzips and loads; only its checksum tells."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    path.write_bytes(bytes(data))


def log_of(work_dir: Path) -> str:
    return '\n'.join(p.read_text() for p in sorted(work_dir.glob('2*/*.log')))


def kept_files(work_dir: Path) -> dict:
    """The work dir's files and their bytes, but the config mmengine dumps there at every start."""
    return {p.name: p.read_bytes() for p in work_dir.iterdir() if p.is_file() and p.suffix != '.py'}


def meta_iter(path: Path) -> int:
    return torch.load(path, weights_only=True)['meta']['iter']


# ------------------------------------------------------------------------------------------ 1: custom names
@pytest.mark.slow
def test_resume_with_a_custom_template_and_an_empty_last_checkpoint_continues(trained_custom, tmp_path):
    """A kill while mmengine rewrote last_checkpoint leaves it empty: the run's own ckpt_N.pth files are found,
    the newest complete one is resumed (before: iteration 0, ckpt_1.. written over)."""
    work_dir = copy_run(trained_custom, tmp_path / 'run')
    (work_dir / 'last_checkpoint').write_text('')
    before = {p.name: p.read_bytes() for p in work_dir.glob('ckpt_*.pth')}
    runner = train_tool.main(custom(work_dir, 4) + ['--resume'])
    assert runner.iter == 4 and '--resume: resuming from' in log_of(work_dir)
    for name, data in before.items():  # nothing it did not resume from was replaced
        assert (work_dir / name).read_bytes() == data, name
    assert meta_iter(work_dir / 'ckpt_4.pth') == 4


@pytest.mark.slow
def test_resume_falls_back_past_a_damaged_newest_custom_checkpoint_and_keeps_it(trained_custom, tmp_path):
    """ckpt_3 damaged in the middle, last_checkpoint empty: resumed from ckpt_2; ckpt_3 moved aside to
    ckpt_3.pth.damaged with its sidecar, named in the log, and not overwritten when the run writes ckpt_3 again."""
    work_dir = copy_run(trained_custom, tmp_path / 'run')
    (work_dir / 'last_checkpoint').write_text('')
    damage_middle(work_dir / 'ckpt_3.pth')
    damaged = (work_dir / 'ckpt_3.pth').read_bytes()
    runner = train_tool.main(custom(work_dir, 3, keep=2) + ['--resume'])
    assert runner.iter == 3
    moved = work_dir / 'ckpt_3.pth.damaged'
    assert moved.read_bytes() == damaged and sidecar(moved).is_file()
    assert 'skipping ckpt_3.pth: its SHA-256' in log_of(work_dir) and 'kept as ckpt_3.pth.damaged' in log_of(work_dir)
    assert checksum_mismatch(work_dir / 'ckpt_3.pth') is None and meta_iter(work_dir / 'ckpt_3.pth') == 3


def test_a_differently_named_newest_checkpoint_is_found_by_its_recorded_iteration(trained_custom, tmp_path):
    """A copy renamed by hand (backup.pth of iteration 3), ckpt_3 gone: it is the newest by the iteration inside."""
    work_dir = copy_run(trained_custom, tmp_path / 'run')
    (work_dir / 'ckpt_3.pth').rename(work_dir / 'backup.pth')
    sidecar(work_dir / 'ckpt_3.pth').unlink()
    (work_dir / 'last_checkpoint').write_text('')
    assert latest_complete_checkpoint(work_dir) == work_dir / 'backup.pth'


@pytest.mark.slow
def test_resume_with_checkpoints_but_none_complete_stops_and_changes_nothing(trained_custom, tmp_path):
    """Every ckpt_N.pth empty or damaged: stop listing them (before: trained from 0 over them)."""
    work_dir = copy_run(trained_custom, tmp_path / 'run')
    (work_dir / 'last_checkpoint').write_text('')
    (work_dir / 'ckpt_1.pth').write_bytes(b'')
    (work_dir / 'ckpt_2.pth').write_bytes((work_dir / 'ckpt_2.pth').read_bytes()[:1000])
    damage_middle(work_dir / 'ckpt_3.pth')
    before = kept_files(work_dir)
    with pytest.raises(NoCompleteCheckpointError, match=r"holds checkpoint files but none complete to resume from "
                                                        r"(.|\n)*ckpt_3\.pth: its SHA-256(.|\n)*ckpt_2\.pth(.|\n)*"
                                                        r"ckpt_1\.pth(.|\n)*Nothing was changed"):
        train_tool.main(custom(work_dir, 3) + ['--resume'])
    assert kept_files(work_dir) == before


@pytest.mark.slow
def test_resume_in_an_empty_work_dir_starts_from_the_beginning(tmp_path):
    runner = train_tool.main(custom(tmp_path, 1) + ['--resume'])
    assert runner.iter == 1 and 'training from the start' in log_of(tmp_path)


# ------------------------------------------------------------------------------------------ 3: sidecars
@pytest.mark.parametrize('kind, said', [
    ('folder', 'cannot be read: it is a folder'), ('empty', r"is not one line .*it holds b''"),
    ('garbage', r"is not one line .*it holds b'not a digest"), ('binary', r"is not one line .*it holds b'\\xff"),
    ('short digest', r"is not one line .*it holds b'abc123"),
    ('dangling link', 'cannot be read: it is a link to nothing')])
def test_an_unreadable_checksum_sidecar_is_an_error_naming_it(trained_custom, tmp_path, kind, said):
    """Before: taken as 'no checksum', and the file judged by reading it."""
    path = tmp_path / 'ckpt_2.pth'
    shutil.copy(trained_custom / 'ckpt_2.pth', path)
    side = sidecar(path)
    if kind == 'folder':
        side.mkdir()
    elif kind == 'dangling link':
        side.symlink_to(tmp_path / 'nowhere')
    else:
        side.write_bytes({'empty': b'', 'garbage': b'not a digest\n', 'binary': b'\xff\xfe' * 40,
                          'short digest': b'abc123  ckpt_2.pth\n'}[kind])
    with pytest.raises(CorruptCheckpointError, match=rf"ckpt_2\.pth is damaged: its checksum file "
                                                     rf"ckpt_2\.pth\.sha256 (exists but )?{said}(.|\n)*sha256sum"):
        read_file(path)


def test_a_checksum_in_sha256sum_binary_mode_is_read(trained_custom, tmp_path):
    path = tmp_path / 'ckpt_2.pth'
    shutil.copy(trained_custom / 'ckpt_2.pth', path)
    digest = sidecar(trained_custom / 'ckpt_2.pth').read_text().split()[0]
    sidecar(path).write_text(f'{digest.upper()} *ckpt_2.pth\n')
    assert checksum_mismatch(path) is None


# ------------------------------------------------------------------------------------------ 5, 7: config values
@pytest.mark.parametrize('value', [0, -16, 4.0, '4', [4], 4.5, True])
def test_a_bad_effective_batch_size_is_one_message_naming_the_key(tmp_path, value):
    """Written in a config file (--cfg-options would turn '4' into 4). Before: a ZeroDivisionError, a TypeError,
    or (4.0, True) accepted."""
    config = tmp_path / 'config.py'
    config.write_text(f"_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']\neffective_batch_size = {value!r}\n")
    with pytest.raises(ConfigValueError, match=rf"config key effective_batch_size must be a whole number >= 1 "
                                               rf"\(images per optimizer step .*\), or None \(.*\); got "
                                               rf"{re.escape(repr(value))} \({type(value).__name__}\)"):
        train_tool.main([str(config), *quick(tmp_path / 'run', 1)[1:]])


@pytest.mark.parametrize('key, value', [('train_cfg.max_iters', '0'), ('train_cfg.max_iters', '-3'),
                                        ('train_cfg.max_epochs', '0')])
def test_a_loop_of_no_iterations_is_refused(tmp_path, key, value):
    """Before: trained nothing and returned as if done (exit 0)."""
    args = quick(tmp_path, 2, f'{key}={value}')
    if 'epochs' in key:  # the quickstart's loop as an epoch-based one
        config = tmp_path / 'by_epoch.py'
        config.write_text(f"_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']\ntrain_cfg = dict(_delete_=True, "
                          f"type='EpochBasedTrainLoop', max_epochs=1)\n")
        args = [str(config), *(a for a in args[1:] if not a.startswith('train_cfg.max_iters'))]
    with pytest.raises(ConfigValueError, match=rf"config key {key} must be a whole number >= 1 \(the "
                                               rf"(iterations|epochs) to train\); got {value}"):
        train_tool.main(args)
    assert not list(tmp_path.glob('*.pth'))


# ------------------------------------------------------------------------------------------ 4: RngStateHook
def edited_checkpoint(trained_custom: Path, to: Path, edit) -> Path:
    """ckpt_2.pth of the trained run with its torch_rng_state edited (written without a checksum, as an edit by
    hand would leave it)."""
    to.mkdir()
    checkpoint = torch.load(trained_custom / 'ckpt_2.pth', weights_only=True)
    edit(checkpoint['torch_rng_state'])
    torch.save(checkpoint, to / 'ckpt_2.pth')
    return to / 'ckpt_2.pth'


@pytest.mark.slow
@pytest.mark.parametrize('edit, said', [
    (lambda s: s.pop('cpu'), r"torch_rng_state has no 'cpu'"),
    (lambda s: s.update(cpu=[1, 2, 3]), r"torch_rng_state\['cpu'\] must be a 1-D torch\.uint8 tensor, got list"),
    (lambda s: s.update(cpu=torch.zeros(5056, dtype=torch.uint8)), r"torch_rng_state\['cpu'\] is not a state "
                                                                     r"torch's generator takes"),
    (lambda s: s.update(cuda='none'), r"torch_rng_state\['cuda'\] must be a list of tensors, got str")])
def test_a_malformed_rng_state_is_an_error_naming_the_checkpoint_and_the_key(trained_custom, tmp_path, edit, said):
    """Before: a raw KeyError / TypeError / RuntimeError from torch before the first step."""
    path = edited_checkpoint(trained_custom, tmp_path / 'run', edit)
    with pytest.raises(RngStateError, match=rf"random-number state of checkpoint {re.escape(str(path))}: {said}"):
        train_tool.main(custom(tmp_path / 'run', 3) + ['--resume', str(path)])


@pytest.mark.slow
def test_a_malformed_kernel_choice_is_a_warning_and_the_kernels_are_timed_afresh(trained_custom, tmp_path):
    """A speed matter only: the run resumes, says so naming the checkpoint, and pins nothing (before: ValueError)."""
    from zoo.runtime import conv_grad
    path = edited_checkpoint(trained_custom, tmp_path / 'run', lambda s: s.update(conv_weight_grad='fastest'))
    conv_grad.shift_gemm_speedup.cache_clear()  # the timing runs once per process: count this run's
    runner = train_tool.main(custom(tmp_path / 'run', 3) + ['--resume', str(path)])
    assert runner.iter == 3
    assert (f"checkpoint {path}: its recorded convolution kernel choice torch_rng_state['conv_weight_grad'] is "
            f"'fastest', not one of ('gemm', 'onednn'): the kernels are timed afresh") in log_of(tmp_path / 'run')
    if os.environ.get('ZOO_CONV_WEIGHT_GRAD', 'auto').lower() == 'auto':  # timed afresh (the doc row's claim)
        assert conv_grad.shift_gemm_speedup.cache_info().currsize == 1
        recorded = torch.load(tmp_path / 'run' / 'ckpt_3.pth', weights_only=True)['torch_rng_state']
        assert recorded['conv_weight_grad'] in ('gemm', 'onednn')
        # the contrast: a well-formed recorded choice is taken as it is, nothing is timed
        valid = edited_checkpoint(trained_custom, tmp_path / 'valid', lambda s: s.update(conv_weight_grad='gemm'))
        conv_grad.shift_gemm_speedup.cache_clear()
        train_tool.main(custom(tmp_path / 'valid', 3) + ['--resume', str(valid)])
        assert conv_grad.shift_gemm_speedup.cache_info().currsize == 0


# ------------------------------------------------------------------------------------------ 6: FSDP optimizer state
@pytest.mark.slow
def test_an_fsdp_resume_whose_optimizer_state_does_not_fit_names_the_checkpoint(trained_custom, tmp_path):
    """The states of two parameters swapped (as another optimizer configuration orders them): before, the full
    tensors that fit no shard were left whole and the first step failed with "mixed torch.Tensor and DTensor".
    One FSDP process under torchrun (gloo) shows it; it stops while resuming, before any step."""
    checkpoint = torch.load(trained_custom / 'ckpt_2.pth', weights_only=True)
    state = checkpoint['optimizer']['state']
    state[0], state[1] = state[1], state[0]
    path = tmp_path / 'swapped.pth'
    torch.save(checkpoint, path)
    args = custom(tmp_path / 'run', 3) + ['--launcher', 'pytorch', '--strategy', 'fsdp', '--resume', str(path)]
    done = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=1',
                           'tools/train.py', *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert done.returncode != 0 and 'mixed torch.Tensor and DTensor' not in done.stderr
    assert (f"OptimizerStateMismatchError: --resume: the optimizer state of checkpoint {path} does not fit this "
            f"run's optimizer: its state 0.exp_avg has shape (192,) where parameter 0 of this run's optimizer has "
            f"(192, 3, 8, 8)") in done.stderr, done.stderr[-3000:]
