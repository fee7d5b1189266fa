"""A training run killed with SIGKILL (between checkpoints, or halfway through writing one) and resumed with
--resume ends where an uninterrupted run ends: same weights, same losses per iteration, same metrics.

The convolution weight-gradient kernel is chosen by a timing per process (zoo.runtime.conv_grad), and the two
kernels sum in different orders: two fresh runs whose timings land on either side of the margin differ (CI on a
loaded AVX-512 EPYC, 2026-12-05: 1.7e-5 in the weights after 12 iterations). So the uninterrupted run and the run
that gets killed both take the shifted GEMMs (``ZOO_CONV_WEIGHT_GRAD=gemm``, the kernel this quiet CPU's timing
does not pick), and the resumed run is left to choose ('auto'): it ends where the uninterrupted run ends only by
taking the choice its checkpoint recorded.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ..training_logs import logged

pytestmark = pytest.mark.slow  # every test here trains (the fast lane: -m "not slow")

ROOT = Path(__file__).resolve().parents[2]
ITERS, EVERY = 12, 4


def train_args(work_dir: Path, *extra) -> list[str]:
    """The quickstart shortened, with DropPath on (so the resumed run must also restore torch's generator) and
    the random flip of its pipeline (numpy's generator)."""
    return ['configs/quickstart.py', '--work-dir', str(work_dir), '--cfg-options', f'train_cfg.max_iters={ITERS}',
            f'train_cfg.val_interval={ITERS}', f'default_hooks.checkpoint.interval={EVERY}',
            'default_hooks.checkpoint.max_keep_ckpts=-1', 'default_hooks.logger.interval=1',
            'model.backbone.drop_path_rate=0.2', 'train_dataloader.batch_size=4',
            'train_dataloader.dataset.num_samples=16', 'val_dataloader.dataset.num_samples=4', *extra]


KERNEL = 'gemm'  # the weight-gradient kernel of the runs a resumed run must match


def run(*args, killed=False, kernel: str = KERNEL):
    env = {**os.environ, 'ZOO_CONV_WEIGHT_GRAD': kernel}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == (-9 if killed else 0), done.stderr[-3000:]


def resume(work_dir: Path) -> None:
    """--resume with the kernel choice left to the process: it must take the one its checkpoint recorded."""
    recorded = torch.load(work_dir / f'iter_{EVERY}.pth', weights_only=True)  # complete in every test here
    assert recorded['torch_rng_state']['conv_weight_grad'] == KERNEL  # the killed run did use the GEMMs
    run('tools/train.py', *train_args(work_dir), '--resume', kernel='auto')


def final_weights(work_dir: Path) -> dict:
    return torch.load(work_dir / f'iter_{ITERS}.pth', weights_only=True)['state_dict']


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
    work_dir = tmp_path_factory.mktemp('uninterrupted')
    run('tools/train.py', *train_args(work_dir))
    return final_weights(work_dir), *logged(work_dir)


def assert_same_run(work_dir: Path, uninterrupted):
    weights, losses, metrics = uninterrupted
    resumed_weights, resumed_losses, resumed_metrics = final_weights(work_dir), *logged(work_dir)
    assert sorted(resumed_losses) == sorted(losses) == list(range(1, ITERS + 1))
    for step, loss in losses.items():
        assert resumed_losses[step] == pytest.approx(loss, abs=1e-6), step
    worst = max((resumed_weights[k] - v).abs().max().item() for k, v in weights.items())
    assert worst <= 1e-6
    assert resumed_metrics.keys() == metrics.keys() and metrics
    for key, value in metrics.items():
        assert resumed_metrics[key] == pytest.approx(value, abs=1e-6), key


def test_killed_between_checkpoints_resumes_to_the_same_run(tmp_path, uninterrupted):
    run('tests/kill_switch.py', 'after-iter', '6', *train_args(tmp_path), killed=True)
    assert (tmp_path / 'last_checkpoint').read_text().strip().endswith('iter_4.pth')
    resume(tmp_path)
    assert_same_run(tmp_path, uninterrupted)


def test_killed_while_writing_a_checkpoint_leaves_no_truncated_one(tmp_path, uninterrupted):
    run('tests/kill_switch.py', 'mid-write', 'iter_8.pth', *train_args(tmp_path), killed=True)
    assert not (tmp_path / 'iter_8.pth').exists()  # only the half-written iter_8.pth.partial
    assert (tmp_path / 'iter_8.pth.partial').stat().st_size > 0
    assert torch.load(tmp_path / 'iter_4.pth', weights_only=True)['meta']['iter'] == 4
    resume(tmp_path)
    assert_same_run(tmp_path, uninterrupted)


def test_resume_skips_a_truncated_latest_checkpoint(tmp_path, uninterrupted):
    """A checkpoint truncated by something other than this project's writer (a full disk, a copy cut short):
    --resume takes the newest complete one and says nothing is lost but the iterations after it."""
    run('tests/kill_switch.py', 'after-iter', '9', *train_args(tmp_path), killed=True)
    latest = tmp_path / 'iter_8.pth'
    latest.write_bytes(latest.read_bytes()[:1000])
    resume(tmp_path)
    assert_same_run(tmp_path, uninterrupted)
