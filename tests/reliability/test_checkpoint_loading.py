"""Training checkpoints through the Runner (tools/train.py): weights-only reads on resume and load_from, code-
running pickles refused, truncated files named, .safetensors weights accepted where only weights are needed."""
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from heads.engine.checkpoints.resume_search import NoCompleteCheckpointError
from zoo.weights.io import CheckpointError, UnsafeCheckpointError

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402


class _RunsCode:
    """Unpickling this calls open(marker, 'w'): what a malicious checkpoint would do, made harmless."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, 'w'))


def quick(work_dir, iters, *extra):
    return ['configs/quickstart.py', '--work-dir', str(work_dir), '--cfg-options', f'train_cfg.max_iters={iters}',
            f'train_cfg.val_interval={iters}', f'default_hooks.checkpoint.interval={iters}',
            'train_dataloader.batch_size=2', 'train_dataloader.dataset.num_samples=4',
            'val_dataloader.dataset.num_samples=2', *extra]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A real checkpoint after 2 iterations (mmengine meta, message hub, optimizer, scheduler, rng state)."""
    work_dir = tmp_path_factory.mktemp('trained')
    train_tool.main(quick(work_dir, 2))
    return work_dir / 'iter_2.pth'


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.slow
@pytest.mark.filterwarnings('ignore:Detected pickle protocol')
def test_resume_refuses_a_checkpoint_that_would_run_code(trained, tmp_path):
    marker = tmp_path / 'code_ran'
    checkpoint = torch.load(trained, weights_only=True)
    checkpoint['meta']['payload'] = _RunsCode(str(marker))
    torch.save(checkpoint, tmp_path / 'evil.pth')
    marker.unlink(missing_ok=True)
    with pytest.raises(UnsafeCheckpointError, match=r'refusing to load .*evil\.pth.*could run arbitrary code'):
        train_tool.main(quick(tmp_path / 'run', 4) + ['--resume', str(tmp_path / 'evil.pth')])
    assert not marker.exists()


@pytest.mark.slow
def test_resume_from_a_truncated_file_names_it(trained, tmp_path):
    (tmp_path / 'cut.pth').write_bytes(trained.read_bytes()[:2000])
    with pytest.raises(CheckpointError, match=r'cannot read checkpoint .*cut\.pth'):
        train_tool.main(quick(tmp_path / 'run', 4) + ['--resume', str(tmp_path / 'cut.pth')])


@pytest.mark.slow
def test_load_from_safetensors_starts_from_those_weights(trained, tmp_path):
    weights = torch.load(trained, weights_only=True)['state_dict']
    save_file({k: v.contiguous() for k, v in weights.items()}, tmp_path / 'w.safetensors')
    runner = train_tool.main(quick(tmp_path / 'run', 1, f"load_from={tmp_path / 'w.safetensors'}",
                                   'optim_wrapper.optimizer.lr=0'))  # lr 0: the step leaves the parameters
    assert runner.iter == 1  # weights only: a new run, counted from 0
    parameters = dict(runner.model.named_parameters())
    assert parameters and all(torch.equal(p, weights[k]) for k, p in parameters.items())


@pytest.mark.slow
def test_resume_from_safetensors_explains_what_is_missing(trained, tmp_path):
    weights = torch.load(trained, weights_only=True)['state_dict']
    save_file({k: v.contiguous() for k, v in weights.items()}, tmp_path / 'w.safetensors')
    with pytest.raises(CheckpointError, match=r'holds weights only.*pass it as load_from'):
        train_tool.main(quick(tmp_path / 'run', 4) + ['--resume', str(tmp_path / 'w.safetensors')])


@pytest.mark.slow
def test_resume_with_checkpoint_files_but_none_complete_stops_instead_of_starting_over(tmp_path):
    """Training from iteration 0 would overwrite iter_2.pth (issue 36; before: it started over)."""
    (tmp_path / 'iter_2.pth').write_bytes(b'not a checkpoint')  # e.g. a copy cut short
    with pytest.raises(NoCompleteCheckpointError, match=r'iter_2\.pth: it is truncated or not a torch checkpoint'):
        train_tool.main(quick(tmp_path, 1) + ['--resume'])
    assert (tmp_path / 'iter_2.pth').read_bytes() == b'not a checkpoint'
