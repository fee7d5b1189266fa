"""end_launch leaves no gloo thread behind: a rank whose process group outlives the interpreter's last Python
frame (held by a reference cycle, as the runner's DDP wrapper is) aborts at exit with 'terminate called without
an active exception' (SIGABRT after a finished run: CI's failed DDP test on an AVX-512 EPYC, 2026-12-05)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import glob, sys
import torch.distributed as dist
from torch import nn
from heads.engine.launch import end_launch

dist.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=0, world_size=1)
holder = {'model': nn.parallel.DistributedDataParallel(nn.Linear(2, 2))}
holder['itself'] = holder  # a reference cycle keeps the group alive until a garbage collection
del holder
end_launch()
print(sorted(open(p).read().strip() for p in glob.glob('/proc/self/task/*/comm')))
"""


def test_end_launch_joins_gloos_threads_before_exit(tmp_path):
    done = subprocess.run([sys.executable, '-c', SCRIPT, str(tmp_path / 'store')], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    threads = done.stdout.strip().splitlines()[-1]
    assert 'gloo' not in threads, f'threads left after end_launch: {threads}'
