"""Issue 36: tools/test.py and Predictor with NaN or infinite weights (a diverged run's checkpoint) printed metrics
and label maps (every pixel class 0). They refuse, naming the checkpoint file and the first non-finite tensor."""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config

import heads
from heads.models.task_checkpoint import NonFiniteWeightsError

ROOT = Path(__file__).resolve().parents[2]
import test as test_tool  # noqa: E402

OPTIONS = ['test_dataloader.dataset.num_samples=1', 'test_dataloader.batch_size=1']


def quickstart() -> Config:
    return Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))


@pytest.mark.slow
def test_test_tool_and_predictor_refuse_non_finite_weights_naming_the_tensor(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    state = heads.MODELS.build(quickstart().model).state_dict()
    path = tmp_path / 'iter_600.pth'
    named = r"iter_600\.pth: tensor neck\.fusion\.2\.proj\.weight .* is not finite"
    evaluate = ['configs/quickstart.py', str(path), '--work-dir', str(tmp_path / 'eval'), '--cfg-options', *OPTIONS]
    for bad in (float('nan'), float('inf')):
        state['neck.fusion.2.proj.weight'][0, 0] = bad  # one value of one tensor
        torch.save({'meta': {'iter': 600}, 'state_dict': state}, path)
        with pytest.raises(NonFiniteWeightsError, match=named):
            heads.Predictor(quickstart(), path)(np.zeros((32, 32, 3), np.uint8))
        with pytest.raises(NonFiniteWeightsError, match=named):
            test_tool.main(evaluate)
    state['neck.fusion.2.proj.weight'][0, 0] = 0.0  # the same checkpoint, finite: evaluated
    torch.save({'meta': {'iter': 600}, 'state_dict': state}, path)
    assert 'mIoU' in test_tool.main(evaluate)
