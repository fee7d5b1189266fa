"""What a training run prints: a short console (summary, progress from the first iterations, results) with the full
details in the log file, no warnings, and an ETA computed from recent iterations plus the validations still to come."""
import subprocess
import sys
from pathlib import Path

import pytest

from heads.engine.console.progress import Eta, early_log_points

ROOT = Path(__file__).resolve().parents[2]


def test_early_log_points_follow_the_1_2_5_series_below_the_interval():
    assert early_log_points(50) == [1, 2, 5, 10, 20]
    assert early_log_points(10) == [1, 2, 5]
    assert early_log_points(200) == [1, 2, 5, 10, 20, 50, 100]
    assert early_log_points(1) == []


def validations_by_simulation(max_iters, interval, begin, done):
    """mmengine's IterBasedTrainLoop.run, iteration by iteration: it validates after iteration i when
    i >= val_begin and (i % val_interval == 0 or i == max_iters)."""
    return sum(1 for i in range(done + 1, max_iters + 1) if i >= begin and (i % interval == 0 or i == max_iters))


@pytest.mark.parametrize('max_iters, interval, begin', [(600, 600, 1), (100, 30, 1), (100, 25, 60), (7, 3, 1),
                                                        (50, 100, 1), (10, 1, 1)])
def test_eta_counts_the_validations_the_loop_will_run(max_iters, interval, begin):
    eta = Eta(max_iters, interval, begin)
    for done in range(max_iters + 1):
        assert eta.validations_after(done) == validations_by_simulation(max_iters, interval, begin, done), done


def test_eta_is_the_recent_mean_times_what_is_left_plus_validations():
    eta = Eta(max_iters=100, val_interval=50, window=3)
    assert eta.seconds_left(10) == 0  # nothing timed yet
    for seconds in (9.0, 1.0, 2.0, 3.0):  # a slow first iteration falls out of the window
        eta.add_iteration(seconds)
    assert eta.seconds_left(40) == pytest.approx(2.0 * 60)  # validations not timed yet: not counted
    eta.add_validation(7.0)
    assert eta.seconds_left(40) == pytest.approx(2.0 * 60 + 7.0 * 2)  # at 50 and at 100
    assert eta.seconds_left(99) == pytest.approx(2.0 + 7.0) and eta.seconds_left(100) == 0


@pytest.mark.slow
def test_the_console_shows_summary_progress_and_results_and_the_log_file_the_rest(tmp_path):
    args = ['tools/train.py', 'configs/quickstart.py', '--work-dir', str(tmp_path), '--cfg-options',
            'train_cfg.max_iters=12', 'train_cfg.val_interval=12', 'val_dataloader.dataset.num_samples=8',
            'default_hooks.checkpoint.interval=12']
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=True)
    console = (done.stdout + done.stderr).splitlines()
    text = '\n'.join(console)
    assert 'WARNING' not in text and 'Warning' not in text, text
    assert 'Config:' not in text and 'paramwise_options' not in text and 'Hooks will be executed' not in text
    assert 'Segmentor (ZooBackbone vit_tiny_patch16_224, DPTNeck, DPTSegHead)' in console[0]
    for step in (1, 2, 5, 10):  # progress from the first iteration, though the logging interval is 50
        assert any(f'Iter(train) [{step:2d}/12]' in line for line in console), step
    assert any('mIoU:' in line for line in console) and sum('| sky ' in line for line in console) == 1
    assert len(console) < 30, text
    log_file = next(tmp_path.glob('*/*.log')).read_text()
    assert 'Config:' in log_file and 'paramwise_options' in log_file and 'Hooks will be executed' in log_file
    assert str(next(tmp_path.glob('*/*.log'))) in text  # the summary names the log file
