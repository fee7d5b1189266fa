"""tools/gpu_check.py on a machine without CUDA: it says so and runs every step tiny on the CPU, and each row
states what this device shows: the FLOPs behind the throughput (counted here) within the matmul rate measured
beside it, whether torch runs SDPA's flash kernel here, FSDP's shares on two gloo processes (computed here from
the parameter shapes), two deterministic runs equal bit for bit, and the compile step skipped by name."""
import importlib.util
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

from lab.benchmark.dense import build_model
from lab.benchmark.gpu_check import flash_row, plan
from zoo.core import set_fused_attention
from zoo.profiling import count_macs

from .records import own_store, series_records

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location('gpu_check_tool', ROOT / 'tools' / 'gpu_check.py')
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)
QUICKSTART = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))
NUMBER = r'([\d.]+(?:e[+-]?\d+)?)'


def flash_runs_here(dtype: str) -> bool:
    """What torch says on this CPU: whether SDPA's flash backend takes the quickstart's attention (3 heads of 64
    channels, 97 tokens) in ``dtype``."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(1, 3, 97, 64, dtype=torch.bfloat16 if dtype == 'bf16' else torch.float32)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, q, q)
    except RuntimeError:
        return False
    return True


def rank0_share(model, processes: int) -> float:
    """Rank 0's share of the parameter + AdamW state bytes under FSDP: every tensor cut on dim 0 in chunks of
    ceil(rows / processes), rank 0 holding the first (the two moments have the parameter's shape)."""
    held = sum(math.ceil(p.shape[0] / processes) * p[0].numel() for p in model.parameters())
    return held / sum(p.numel() for p in model.parameters())


@pytest.mark.slow
def test_the_cpu_path_runs_every_step(tmp_path, monkeypatch):
    folder = own_store(monkeypatch, tmp_path)
    out = tmp_path / 'gpu_check.md'
    rows = {r['step']: r for r in tool.main(['--device', 'cpu', '--no-compile', '--out', str(out)])}
    assert 'error' not in rows, rows.get('error')
    assert set(rows) == {'train', 'inference', 'flash', 'inference_big', 'compile', 'ddp', 'fsdp', 'fp16', 'syncbn',
                         'deterministic'}
    assert 'no CUDA device' in out.read_text().splitlines()[0]
    p = plan('cpu')
    model = build_model(QUICKSTART, 'cpu').eval()
    flops = 2 * count_macs(model, torch.randn(1, 3, *p['size']))  # one image's forward, counted here
    # throughput: img/s x the FLOPs per image counted here is the TFLOP/s stated, a share in (0, 100%] of the
    # matmul rate measured in the same rounds
    train = re.search(rf'{NUMBER} GFLOP per image: {NUMBER} TFLOP/s = {NUMBER}% of the matmul rate measured in the '
                      rf'same rounds \({NUMBER} TFLOP/s\)', rows['train']['detail'])
    assert train, rows['train']
    per_image, tflops, share, matmul = map(float, train.groups())
    img_s = float(rows['train']['result'].removesuffix(' img/s'))
    assert math.isclose(per_image, 3 * flops / 1e9, rel_tol=5e-3)
    assert math.isclose(tflops, img_s * 3 * flops / 1e12, rel_tol=1e-2), (tflops, img_s, flops)
    assert 0 < share <= 100 and 0 < tflops <= matmul, rows['train']
    inference = re.search(rf'{NUMBER} GFLOP per image: {NUMBER}% of the matmul rate', rows['inference']['detail'])
    assert inference and math.isclose(float(inference[1]), flops / 1e9, rel_tol=5e-3), rows['inference']
    assert 0 < float(inference[2]) <= 100 and float(rows['inference']['result'].removesuffix(' img/s')) > 0
    # the large forward holds at least its own logits: classes x the image's pixels in fp32
    logits_mib = QUICKSTART.model.decode_head.num_classes * math.prod(p['big']) * 4 / 2 ** 20
    assert float(rows['inference_big']['result'].removesuffix(' MiB')) >= logits_mib, rows['inference_big']
    # flash: what torch does on this CPU, for each of the quickstart's attention calls
    depth = QUICKSTART.model.backbone.depth
    if flash_runs_here(p['dtype']):
        assert rows['flash']['result'] == 'yes', rows['flash']
        assert rows['flash']['detail'].startswith(f"{depth} of the model's {depth} attention calls ran SDPA's flash")
    else:
        assert rows['flash']['result'] == 'no', rows['flash']
    assert rows['compile'] == {'step': 'compile', 'result': 'skipped', 'detail': 'not run: --no-compile was given'}
    assert rows['ddp']['result'] == 'ok' and '1 process, gloo' in rows['ddp']['detail'], rows['ddp']
    assert rows['fsdp']['result'] == 'ok' and '2 process(es), gloo' in rows['fsdp']['detail'], rows['fsdp']
    share = re.search(r'rank 0 holds ([\d.]+) of the parameter \+ optimizer bytes', rows['fsdp']['detail'])
    assert share and abs(float(share[1]) - rank0_share(model, 2)) < 2e-3, (rows['fsdp'], rank0_share(model, 2))
    assert rows['deterministic']['result'] == 'equal', rows['deterministic']
    # fp16 with dynamic loss scaling: a finite loss, and a GradScaler's scale (a power of two) saved with the run
    fp16 = re.search(rf'last logged loss {NUMBER}, loss scale at the end {NUMBER}, weights finite',
                     rows['fp16']['detail'])
    assert rows['fp16']['result'] == 'ok' and fp16, rows['fp16']
    assert math.log2(float(fp16[2])).is_integer(), rows['fp16']
    assert rows['syncbn'] == {'step': 'syncbn', 'result': 'skipped', 'detail': "torch's SyncBatchNorm needs CUDA"}
    # each step that measured something is a record (series gpu_check), the timed ones with every round
    records = {r['settings']['step']: r for r in series_records(folder, 'gpu_check')}
    assert list(records) == ['train', 'inference', 'flash', 'inference_big', 'ddp', 'fsdp', 'fp16']
    assert all(r['settings'] == {'step': step, 'device': 'cpu', 'dtype': p['dtype']} for step, r in records.items())
    for step in ('train', 'inference'):
        assert {k: len(v) for k, v in records[step]['rounds'].items()} == {'ours': p['iters'], 'matmul': p['iters']}
        assert f"{records[step]['metrics']['img_s']:.3g} img/s" == rows[step]['result']
    assert f"{records['inference_big']['metrics']['peak_MiB']:.0f} MiB" == rows['inference_big']['result']
    assert records['fsdp']['metrics']['rank0_share'] == float(share[1]) and records['ddp']['metrics']['wall_s'] > 0
    assert records['fp16']['metrics']['loss_scale'] == float(fp16[2])
    assert len(series_records(folder, 'train')) >= 4  # the tools/train.py runs it made recorded themselves


def test_flash_is_no_when_the_attention_bypasses_sdpa():
    """The explicit softmax(q k^T) v path runs under flash-only SDPA without error: that is not the flash kernel."""
    p = plan('cpu')
    model = set_fused_attention(build_model(QUICKSTART, 'cpu').eval(), False)
    row = flash_row(model, p, 'cpu')
    depth = QUICKSTART.model.backbone.depth
    assert row['result'] == 'no' and row['detail'].startswith(f"0 of the model's {depth} attention calls"), row
