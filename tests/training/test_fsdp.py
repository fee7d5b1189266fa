"""Sharded training (``tools/train.py --strategy fsdp``) on CPU with 2 gloo processes, against DDP.

Five runs of the quickstart, shrunk (48x64 scenes, batch 2 per process, 4 iterations, checkpoints at 2 and 4, AdamW
with gradient clipping at norm 1, which the gradients of ~8 exceed), in one torchrun launch, shared by the tests:
DDP; FSDP with activation checkpointing; FSDP and DDP each resumed from the FSDP run's iteration-2 checkpoint;
2 iterations of FSDP with bf16 parameters. The quickstart is kept as it is otherwise
(flip, dropout, DropPath, per-process BatchNorm): both strategies give each rank the same batches and draw the same
random numbers on it (FSDP initialises and broadcasts before sharding; checkpointed blocks replay their random
state), so they compute the same per-rank losses; only the sums differ in order (DDP all-reduces bucketed
gradients, FSDP reduce-scatters each block's). The largest weight difference is in the key part of a qkv bias,
whose gradient is zero up to round-off (softmax ignores a constant added to every key): AdamW scales that noise
into steps of about the learning rate.

Tolerances: FSDP against DDP 1e-5, as DDP against one process in test_distributed.py (float32 round-off of the
reductions, ~1e-7 relative per step; measured below). The resume is compared bit for bit: the resumed run cuts the
same shards from the full checkpoint, replays the same data and random state, and runs the same sharded kernels
in the same order, so nothing is left to differ.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from heads.engine.console.logs import read_scalars

from ..training_logs import logged
from .test_distributed import ROOT, run

ITERS, HALF, PER_RANK, WORLD = 4, 2, 2, 2
TOL = 1e-5
SIZE = (48, 64)


def small_quickstart(tmp_path):
    config = tmp_path / 'quickstart_small.py'
    config.write_text(f"""
_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']
model = dict(backbone=dict(img_size={SIZE}))
train_dataloader = dict(batch_size={PER_RANK}, dataset=dict(num_samples=16, size={SIZE}))
val_dataloader = dict(dataset=dict(num_samples=4, size={SIZE}))
test_dataloader = val_dataloader
train_cfg = dict(max_iters={ITERS}, val_interval={ITERS})
default_hooks = dict(checkpoint=dict(interval={HALF}, max_keep_ckpts=3), logger=dict(interval=1))
optim_wrapper = dict(clip_grad=dict(max_norm=1.0))
""")
    return config


def five_runs(config, tmp: Path) -> None:
    """DDP, FSDP, FSDP resumed from the FSDP run's iteration HALF, DDP resumed from it, and HALF iterations of
    FSDP with bf16 parameters, each tools/train.py's main, in the same two processes (one launch: the imports,
    most of a run's time here, are paid once)."""
    import torch.distributed as dist

    sys.path[:0] = [str(ROOT), str(ROOT / 'tools')]
    import train

    common = [str(config), '--launcher', 'pytorch']
    fsdp = ['--strategy', 'fsdp', '--cfg-options', 'model_wrapper_cfg.activation_checkpointing=True']
    train.main([*common, '--work-dir', str(tmp / 'ddp')])
    train.main([*common, '--work-dir', str(tmp / 'fsdp'), *fsdp])
    if dist.get_rank() == 0:
        for resumed in ('resumed', 'ddp_resumed'):
            (tmp / resumed).mkdir()
            for name in (f'iter_{HALF}.pth', f'iter_{HALF}.pth.sha256'):
                shutil.copy(tmp / 'fsdp' / name, tmp / resumed / name)
    dist.barrier()
    train.main([*common, '--work-dir', str(tmp / 'resumed'), '--resume', *fsdp])
    train.main([*common, '--work-dir', str(tmp / 'ddp_resumed'), '--resume'])
    train.main([*common, '--work-dir', str(tmp / 'bf16'), '--strategy', 'fsdp', '--cfg-options',
                'model_wrapper_cfg.param_dtype=bfloat16', 'model_wrapper_cfg.reduce_dtype=float32',
                f'train_cfg.max_iters={HALF}'])


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('fsdp')
    run('-m', 'tests.training.test_fsdp', small_quickstart(tmp), tmp, nproc=WORLD)  # five_runs, below
    return tmp


def checkpoint(path):
    return torch.load(path, weights_only=True)


def max_diff(a: dict, b: dict) -> float:
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a if a[k].is_floating_point())


@pytest.mark.slow
def test_fsdp_trains_like_ddp(runs):
    tmp = runs
    ddp, fsdp = checkpoint(tmp / 'ddp' / f'iter_{ITERS}.pth'), checkpoint(tmp / 'fsdp' / f'iter_{ITERS}.pth')
    (ddp_losses, ddp_metrics), (losses, metrics) = logged(tmp / 'ddp'), logged(tmp / 'fsdp')
    assert sorted(losses) == sorted(ddp_losses) == list(range(1, ITERS + 1))
    loss_diff = max(abs(losses[i] - ddp_losses[i]) for i in losses)
    weight_diff = max_diff(ddp['state_dict'], fsdp['state_dict'])
    state = lambda c: {f'{i}.{k}': v for i, s in c['optimizer']['state'].items() for k, v in s.items()}  # noqa: E731
    adam_diff = max_diff(state(ddp), state(fsdp))
    # the norm clipped at 1 (over the shards under FSDP): the same before clipping, and clipping did act
    norms, ddp_norms = read_scalars(tmp / 'fsdp')['train']['grad_norm'], read_scalars(tmp / 'ddp')['train']['grad_norm']
    norm_diff = max(abs(norms[i] - ddp_norms[i]) / ddp_norms[i] for i in ddp_norms)
    print(f'FSDP vs DDP, 2 processes x batch {PER_RANK}, {ITERS} iterations: weights {weight_diff:.2e}, '
          f'losses {loss_diff:.2e}, AdamW moments {adam_diff:.2e}, gradient norms {norm_diff:.2e} (relative)')
    assert weight_diff <= TOL and loss_diff <= TOL and adam_diff <= TOL and norm_diff <= TOL
    assert sorted(norms) == list(range(1, ITERS + 1)) and min(norms.values()) > 1
    assert metrics == ddp_metrics and 'mIoU' in metrics  # validated by the sharded model, gathered from both ranks


@pytest.mark.slow
def test_fsdp_checkpoint_has_the_unsharded_format(runs):
    """Same keys, shapes and dtypes as DDP's, model and optimizer: every reader of checkpoints takes it."""
    tmp = runs
    ddp, fsdp = checkpoint(tmp / 'ddp' / f'iter_{ITERS}.pth'), checkpoint(tmp / 'fsdp' / f'iter_{ITERS}.pth')
    assert fsdp.keys() == ddp.keys()
    layout = lambda sd: [(k, v.shape, v.dtype, type(v)) for k, v in sd.items()]  # noqa: E731
    assert layout(fsdp['state_dict']) == layout(ddp['state_dict'])
    assert fsdp['optimizer']['param_groups'] == ddp['optimizer']['param_groups']
    assert {i: layout(s) for i, s in fsdp['optimizer']['state'].items()} == \
           {i: layout(s) for i, s in ddp['optimizer']['state'].items()}


@pytest.mark.slow
def test_fsdp_checkpoint_predicts_in_one_process_as_ddp_s(runs):
    """The FSDP checkpoint into a plain model (Predictor, this project's strict loader): the same label maps
    as DDP's checkpoint, logits within the weights' tolerance."""
    from mmengine.config import Config

    import heads

    tmp = runs
    cfg = Config.fromfile(str(tmp / 'quickstart_small.py'))
    fsdp = heads.Predictor(cfg, tmp / 'fsdp' / f'iter_{ITERS}.pth')
    ddp = heads.Predictor(cfg, tmp / 'ddp' / f'iter_{ITERS}.pth')
    images = torch.randint(0, 256, (3, *SIZE, 3), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    for image in images.numpy():
        assert (fsdp(image) == ddp(image)).all()
    x = torch.randn(2, 3, *SIZE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logit_diff = (fsdp.model(x, mode='tensor') - ddp.model(x, mode='tensor')).abs().max().item()
    print(f'logits of the FSDP and DDP checkpoints in one process: max difference {logit_diff:.2e}')
    assert logit_diff <= 10 * TOL


@pytest.mark.slow
def test_fsdp_resume_is_bit_exact(runs):
    tmp = runs
    whole, resumed = checkpoint(tmp / 'fsdp' / f'iter_{ITERS}.pth'), checkpoint(tmp / 'resumed' / f'iter_{ITERS}.pth')
    for key in whole['state_dict']:
        assert torch.equal(whole['state_dict'][key], resumed['state_dict'][key]), key
    for i, state in whole['optimizer']['state'].items():
        for name, value in state.items():
            assert torch.equal(value, resumed['optimizer']['state'][i][name]), (i, name)
    (losses, metrics), (resumed_losses, resumed_metrics) = logged(tmp / 'fsdp'), logged(tmp / 'resumed')
    assert sorted(resumed_losses) == list(range(HALF + 1, ITERS + 1))
    assert all(resumed_losses[i] == losses[i] for i in resumed_losses) and resumed_metrics == metrics


@pytest.mark.slow
def test_ddp_resumes_from_an_fsdp_checkpoint(runs):
    """The optimizer state FSDP writes is DDP's format: DDP resumed from FSDP's iteration HALF ends where DDP's
    own run does, within the FSDP/DDP tolerance."""
    tmp = runs
    ddp, resumed = checkpoint(tmp / 'ddp' / f'iter_{ITERS}.pth'), checkpoint(tmp / 'ddp_resumed' / f'iter_{ITERS}.pth')
    diff = max_diff(ddp['state_dict'], resumed['state_dict'])
    print(f'DDP resumed from the FSDP checkpoint vs DDP throughout: weights {diff:.2e}')
    assert diff <= TOL
    assert sorted(logged(tmp / 'ddp_resumed')[0]) == list(range(HALF + 1, ITERS + 1))


@pytest.mark.slow
def test_fsdp_holds_about_half_of_ddp_s_memory_per_process(runs):
    """Rank 0's count of its parameter and AdamW-state bytes (logged by the run) against the formula: each
    tensor's dim 0 cut in chunks of ceil(n / 2), rank 0 taking the first; DDP holds every tensor whole."""
    from mmengine.config import Config

    from heads.registry import MODELS

    tmp = runs
    log = next((tmp / 'fsdp').glob('*/*.log')).read_text()  # rank 0's
    line = re.search(r'FSDP: parameters \+ optimizer state on rank 0: (\d+) bytes .*?: (\d+) bytes .*?ratio ([\d.]+)',
                     log)
    assert line, 'the FSDP run logs its memory'
    local, full, ratio = int(line[1]), int(line[2]), float(line[3])
    model = MODELS.build(Config.fromfile(str(tmp / 'quickstart_small.py')).model)
    # the parameters, and AdamW's exp_avg and exp_avg_sq of those that had gradients (DPT's unused residual unit
    # has none); the step counters are scalars, not counted
    states = checkpoint(tmp / 'fsdp' / f'iter_{ITERS}.pth')['optimizer']['state'].values()
    shapes = [p.shape for p in model.parameters()] + [v.shape for s in states for v in s.values() if v.dim()]
    rank0_shard = lambda shape: -(-shape[0] // WORLD) * shape[1:].numel()  # noqa: E731
    assert local == 4 * sum(rank0_shard(s) for s in shapes)  # float32
    assert full == 4 * sum(s.numel() for s in shapes)
    print(f'FSDP/DDP parameter + optimizer bytes per process, 2 processes: {ratio:.3f}')
    assert ratio <= 0.6


@pytest.mark.slow
def test_fsdp_bf16_parameters_compute_in_bf16_and_keep_fp32_weights(runs):
    """param_dtype=bfloat16 changes the losses by bf16 round-off (not 0: the gathered parameters and activations
    are bf16; not more than ~1e-2 relative after 2 AdamW steps from the same start), and the sharded weights and
    the checkpoint stay fp32."""
    tmp = runs
    fp32, bf16 = logged(tmp / 'fsdp')[0], logged(tmp / 'bf16')[0]
    assert sorted(bf16) == list(range(1, HALF + 1))
    diffs = [abs(bf16[i] - fp32[i]) / fp32[i] for i in bf16]
    print(f'bf16 parameters vs fp32, relative loss differences: {", ".join(f"{d:.1e}" for d in diffs)}')
    assert all(0 < d < 1e-2 for d in diffs)
    weights = checkpoint(tmp / 'bf16' / f'iter_{HALF}.pth')['state_dict']
    assert {v.dtype for v in weights.values() if v.is_floating_point()} == {torch.float32}


def test_fsdp_without_torchrun_says_what_to_do():
    done = subprocess.run([sys.executable, 'tools/train.py', 'configs/quickstart.py', '--strategy', 'fsdp'],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'torchrun --nproc_per_node 2 tools/train.py CONFIG --launcher pytorch --strategy fsdp' in done.stderr


if __name__ == '__main__':
    five_runs(sys.argv[1], Path(sys.argv[2]))
