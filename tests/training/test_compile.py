"""--compile (heads/engine/switches/compile.py): torch.compile of the backbone and neck gives eager's outputs at two
input sizes, keeps the state dict's names, and is switched on by the tools through the runner."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from heads.engine.launch import enable_compile
from heads.engine.switches.compile import compile_from_config, compile_parts
from heads.registry import MODELS

ROOT = Path(__file__).resolve().parents[2]


def tiny_model():
    cfg = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))
    torch.manual_seed(0)
    return MODELS.build(cfg.model).eval()


@pytest.mark.slow
def test_compiled_backbone_and_neck_give_eager_outputs_at_two_sizes():
    eager, compiled = tiny_model(), tiny_model()
    compiled.load_state_dict(eager.state_dict())
    names = list(compiled.state_dict())
    assert compile_parts(compiled, dynamic=True) == ['backbone', 'neck']
    assert list(compiled.state_dict()) == names  # checkpoints are the same with and without compiling
    torch._dynamo.reset()
    for size in ((64, 96), (96, 64)):  # compiled once for dynamic sizes: the second size reuses the graphs
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            expected, got = eager(x, mode='tensor'), compiled(x, mode='tensor')
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_the_config_switch_and_its_errors():
    cfg = Config(dict(model=dict()))
    enable_compile(cfg)
    assert cfg.compile_parts == dict(parts=['backbone', 'neck'], dynamic=None)
    model = tiny_model()
    assert compile_from_config(model, None) == []
    with pytest.raises(ValueError, match='has no head_x to compile'):
        compile_from_config(model, dict(parts=['head_x']))
    with pytest.raises(ValueError, match='no key dynamc'):
        compile_from_config(model, dict(dynamc=True))
