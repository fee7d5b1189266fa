"""Data-parallel training under torchrun on CPU (gloo): two processes with batch b train like one with batch 2b.

The deterministic config (written per test from configs/quickstart.py): no RandomFlip (the test pipeline for
training), no Dropout in the head, no DropPath; the quickstart's InfiniteSampler with its seeded shuffle, which
gives rank r the positions r, r+2, ... of one order, so a step's 2 x b samples are the one-process batch of 2b.

BatchNorm: the quickstart's DPTSegHead has one BatchNorm2d (``decode_head.head.1``). In training it normalises
with the statistics of its process's b samples, not of all 2b, so the runs differ (measured: 3.7e-4 in the
weights after 5 iterations, as much as training on half the data). torch's SyncBatchNorm (``sync_bn='torch'``)
refuses CPU modules ("SyncBatchNorm layers only work with GPU modules") and the head has no option without BN.
Both runs therefore go through this file's entry point (``python -m tests.training.test_distributed ARGS``:
tools/train.py with BatchNorm layers in eval mode, the same in both runs: fixed statistics, learnt affine weights,
mmseg's ``norm_eval``). The logged losses are the whole batch's (TaskModel.parse_losses averages them over the
processes). The plain command is run as well, on the quickstart itself.

Tolerances: the runs compute the same sums in other orders (convolutions over 2 or 4 images, the mean of two
per-process means, gloo's all-reduce), float32 round-off of ~1e-7 relative per step; AdamW rescales gradients,
so the weights differ by far less than the learning rate (measured: 2e-8 for weights, 1.2e-7 for losses; with the
shifted-GEMM weight gradients on an AVX-512 EPYC, 6e-8 and 1.2e-7).
1e-5 leaves room for other CPUs and is far below what a wrong split gives: one process with batch b, i.e. each
rank training on its own b samples without gradient averaging, differs by 4e-4 in weights and >= 5e-4 in the
loss of every iteration; per-rank BatchNorm by 3.7e-4.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.weights.checksum import checksum_mismatch

from ..training_logs import logged

pytestmark = pytest.mark.slow  # every test here trains (the fast lane: -m "not slow")

ROOT = Path(__file__).resolve().parents[2]
ITERS, PER_RANK, WORLD = 5, 2, 2
TOL = 1e-5


def deterministic_config(tmp_path: Path) -> Path:
    config = tmp_path / 'quickstart_deterministic.py'
    config.write_text(f"""
_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']
model = dict(backbone=dict(drop_path_rate=0.0), decode_head=dict(dropout=0.0))
train_dataloader = dict(dataset=dict(num_samples=16, pipeline={{{{_base_.test_pipeline}}}}))
val_dataloader = dict(dataset=dict(num_samples=6))
train_cfg = dict(max_iters={ITERS}, val_interval={ITERS})
default_hooks = dict(checkpoint=dict(interval={ITERS}), logger=dict(interval=1))
custom_hooks = [dict(type='SafeCheckpointHook')]
""")
    return config


def run(*args, nproc: int = 1):
    """``python ARGS``, or ``torchrun --standalone --nproc_per_node NPROC ARGS`` (a free port of its own), in the
    repo root with one thread per process (two processes on two cores). The convolution weight-gradient kernel is
    fixed (the shifted GEMMs): each launch would otherwise time the two kernels itself, and runs whose timings
    land on either side of the margin sum in other orders (zoo.runtime.conv_grad; 1.5e-5 in the weights)."""
    launch = ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={nproc}'] if nproc > 1 else []
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'ZOO_CONV_WEIGHT_GRAD': 'gemm'}
    done = subprocess.run([sys.executable, *launch, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def assert_one_checkpoint(work_dir: Path, iters: int) -> dict:
    """Rank 0 alone wrote the final checkpoint: one whole file and its checksum, no leftover partial one."""
    assert sorted(p.name for p in work_dir.glob('*.pth*')) == [f'iter_{iters}.pth', f'iter_{iters}.pth.sha256']
    assert checksum_mismatch(work_dir / f'iter_{iters}.pth') is None
    assert (work_dir / 'last_checkpoint').read_text().strip().endswith(f'iter_{iters}.pth')
    return torch.load(work_dir / f'iter_{iters}.pth', weights_only=True)['state_dict']


def test_two_processes_of_batch_b_train_like_one_process_of_batch_2b(tmp_path):
    config = deterministic_config(tmp_path)
    me = ('-m', 'tests.training.test_distributed')  # this file's entry point, below
    run(*me, config, '--launcher', 'pytorch', '--work-dir', tmp_path / 'ddp', '--cfg-options',
        f'train_dataloader.batch_size={PER_RANK}', nproc=WORLD)
    run(*me, config, '--work-dir', tmp_path / 'single', '--cfg-options',
        f'train_dataloader.batch_size={PER_RANK * WORLD}')

    ddp, single = assert_one_checkpoint(tmp_path / 'ddp', ITERS), assert_one_checkpoint(tmp_path / 'single', ITERS)
    assert ddp.keys() == single.keys()
    weight_diff = max((ddp[k].double() - single[k].double()).abs().max().item() for k in single)
    (ddp_losses, ddp_metrics), (losses, metrics) = logged(tmp_path / 'ddp'), logged(tmp_path / 'single')
    assert sorted(ddp_losses) == sorted(losses) == list(range(1, ITERS + 1))
    loss_diff = max(abs(ddp_losses[i] - losses[i]) for i in losses)
    print(f'2 processes x batch {PER_RANK} vs 1 x {PER_RANK * WORLD}: max weight difference {weight_diff:.2e}, '
          f'max loss difference {loss_diff:.2e}')
    assert weight_diff <= TOL and loss_diff <= TOL
    # gathered from both ranks: rank 0's half of the 6 validation images alone gives another aAcc (51.93, not 51.40)
    assert ddp_metrics == metrics and 'mIoU' in metrics


def test_torchrun_trains_the_quickstart(tmp_path):
    """The documented command itself (train.py, quickstart with its BatchNorm, flip and dropout) finishes."""
    done = run('tools/train.py', 'configs/quickstart.py', '--launcher', 'pytorch', '--work-dir', tmp_path,
               '--cfg-options', 'train_cfg.max_iters=2', 'train_cfg.val_interval=2',
               'default_hooks.checkpoint.interval=2', 'default_hooks.logger.interval=1',
               'train_dataloader.batch_size=2', 'train_dataloader.dataset.num_samples=8',
               'val_dataloader.dataset.num_samples=4', nproc=WORLD)
    assert f'{WORLD} processes (distributed training)' in done.stdout + done.stderr  # the run summary says so
    assert 'Distributed training: True' in next(tmp_path.glob('*/*.log')).read_text()  # mmengine's own line
    assert_one_checkpoint(tmp_path, 2)
    losses, metrics = logged(tmp_path)
    assert sorted(losses) == [1, 2] and 'mIoU' in metrics
    assert (tmp_path / 'predictions.png').stat().st_size > 0


def _train_with_frozen_batch_norm(argv):
    """tools/train.py's main with BatchNorm layers in eval mode (see the module docstring)."""
    from torch import nn
    from torch.nn.modules.batchnorm import _BatchNorm

    sys.path[:0] = [str(ROOT), str(ROOT / 'tools')]
    import train

    _BatchNorm.train = lambda self, mode=True: nn.Module.train(self, False)
    train.main(argv)
    from heads.engine.launch import end_launch
    end_launch()


if __name__ == '__main__':
    _train_with_frozen_batch_norm(sys.argv[1:])
