"""tools/gpu_check.py on a machine without CUDA: it says so and runs every step tiny on the CPU, each with a real
result (DDP and FSDP runs through torchrun, two deterministic runs compared bit for bit)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('gpu_check_tool', ROOT / 'tools' / 'gpu_check.py')
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def test_the_cpu_path_runs_every_step(tmp_path):
    out = tmp_path / 'gpu_check.md'
    rows = {r['step']: r for r in tool.main(['--device', 'cpu', '--no-compile', '--out', str(out)])}
    assert 'error' not in rows, rows.get('error')
    assert set(rows) == {'train', 'inference', 'flash', 'inference_big', 'ddp', 'fsdp', 'deterministic'}
    assert float(rows['train']['result'].split()[0]) > 0 and float(rows['inference']['result'].split()[0]) > 0
    assert '% of the matmul rate measured in the same rounds' in rows['train']['detail']
    assert rows['flash']['result'] in ('yes', 'no') and float(rows['inference_big']['result'].split()[0]) > 0
    assert rows['ddp']['result'] == 'ok' and 'gloo' in rows['ddp']['detail']
    assert rows['fsdp']['result'] == 'ok' and 'gloo' in rows['fsdp']['detail'], rows['fsdp']
    assert 'rank 0 holds 1.000 of the parameter + optimizer bytes' in rows['fsdp']['detail']  # one process: all
    assert rows['deterministic']['result'] == 'equal'
    assert 'no CUDA device' in out.read_text().splitlines()[0]
