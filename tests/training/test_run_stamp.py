"""Two runs of one config that start within one second in one process keep to their own work dirs: mmengine names a
run's logger, message hub and visualizer by the config and the second, and hands back the instance of a name already
taken, so without :func:`heads.engine.console.run_stamp.unique_stamp` the second run wrote its log and scalars into
the first run's work dir and inherited its message hub (with its ``best_score``)."""
import time

import pytest
from mmengine.config import Config

from heads.engine.console.logs import read_scalars
from heads.engine.runner import ZooRunner

from .test_every_config import ROOT, small_config, train_tool

SECOND = '20260101_000000'


@pytest.fixture
def one_second(monkeypatch):
    """Every run of the test starts within the same second (mmengine stamps runs with this format)."""
    strftime = time.strftime
    monkeypatch.setattr(time, 'strftime', lambda fmt, *args: SECOND if fmt == '%Y%m%d_%H%M%S' else strftime(fmt, *args))


def test_a_second_runner_of_a_config_in_the_same_second_gets_its_own_log_visualizer_and_message_hub(
        tmp_path, one_second):
    cfg = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))
    first, second = (ZooRunner.from_cfg(Config({**cfg.to_dict(), 'work_dir': str(tmp_path / name)},
                                               filename=cfg.filename)) for name in ('a', 'b'))
    first.message_hub.update_info('best_score', 99.0)
    assert second.experiment_name != first.experiment_name
    assert second.timestamp.startswith(SECOND) and second.timestamp != first.timestamp
    assert str(tmp_path / 'b') in second.logger.log_file
    assert all(str(tmp_path / 'b') in backend._save_dir for backend in second.visualizer._vis_backends.values())
    assert second.message_hub is not first.message_hub and second.message_hub.get_info('best_score') is None


@pytest.mark.slow
def test_two_short_trainings_of_one_config_in_one_second_each_log_into_their_own_work_dir(tmp_path, one_second):
    config = small_config('dpt_vitt4_camvid_cpu.py', tmp_path)
    cfg = Config.fromfile(str(config))
    cfg.default_hooks.logger.interval = 1  # the one iteration is logged, to <work_dir>/<timestamp>/vis_data
    cfg.visualizer = dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend')])
    cfg.dump(str(config))
    for name in ('a', 'b'):
        train_tool.main([str(config), '--work-dir', str(tmp_path / name)])
    for name in ('a', 'b'):  # without unique stamps: no log in b, both runs' records in a
        scalars = read_scalars(tmp_path / name)
        assert sorted(scalars['train']['loss']) == [1], name
