"""The results store (tools/lab/records): machine kinds from /proc/cpuinfo texts, records appended and read back
whole, a damaged line named with its file and line, and no test writing into the committed store."""
import json
import os
from pathlib import Path

import pytest

from lab.records import machine, store

ROOT = Path(__file__).resolve().parents[2]
EPYC_AVX2 = 'model name\t: AMD EPYC 7R32 Processor\nflags\t\t: fpu sse2 avx avx2 fma\n'
EPYC_AVX512 = 'model name\t: AMD EPYC 9R14 96-Core Processor\nflags\t\t: fpu avx2 avx512f avx512bw\n'
XEON_AMX = 'model name\t: Intel(R) Xeon(R) Platinum 8488C\nflags\t\t: avx2 avx512f amx_bf16 amx_tile\n'


@pytest.mark.parametrize('text, family, isa', [(EPYC_AVX2, 'amd-epyc', 'avx2'), (EPYC_AVX512, 'amd-epyc', 'avx512'),
                                               (XEON_AMX, 'intel-xeon', 'amx'), ('', None, 'other')])
def test_a_cpu_is_named_by_its_family_and_widest_isa(text, family, isa):
    info = machine.cpu_info(text)
    assert info['isa'] == isa
    if family:
        info['cores'] = 2
        assert machine.kind({**info, 'gpu': None}) == f'cpu-{family}-{isa}-2c'
    assert machine.kind({**info, 'gpu': 'NVIDIA H200'}) == 'gpu-nvidia-h200'


def test_records_are_appended_whole_and_read_back(tmp_path):
    first = store.record('s', settings={'size': 64}, rounds={'ours': [1.0, 1.5], 'reference': [2.0, 2.5]},
                         command='python tools/x.py', store=tmp_path, threads=1)
    second = store.record('s', settings={'size': 96}, metrics={'miou': 0.5}, store=tmp_path, threads=1)
    assert first == second and first.parent == tmp_path and first.name == f"{machine.kind(machine.machine())}.jsonl"
    records = store.read(tmp_path)
    assert [r['settings']['size'] for r in records] == [64, 96]
    assert records[0]['rounds']['reference'] == [2.0, 2.5] and records[0]['command'] == 'python tools/x.py'
    assert records[0]['versions']['torch'] and records[0]['code']['zoo'] and len(records[0]['commit']) == 40
    with pytest.raises(store.RecordError, match='rounds or metrics'):
        store.record('s', settings={}, store=tmp_path, threads=1)


def test_a_record_says_what_the_process_ran_with(tmp_path, monkeypatch):
    """The same command on two hosts of one kind gave a DPT training step of 6.26 s and 8.19 s: the records must say
    which kernels each process chose, and the allocator settings it ran under."""
    from zoo.runtime import conv_grad
    monkeypatch.setenv('GLIBC_TUNABLES', 'glibc.malloc.mmap_max=0')
    monkeypatch.setenv('ZOO_CONV_WEIGHT_GRAD', 'gemm')
    monkeypatch.setattr(conv_grad, '_used', conv_grad._used)   # this process's choice back after the test
    conv_grad.choice()
    entry = store.make_record('s', settings={}, metrics={'x': 1.0}, threads=1)
    assert entry['env']['GLIBC_TUNABLES'] == 'glibc.malloc.mmap_max=0' and len(entry['load']) == 3
    assert entry['kernels']['conv_weight_grad'] == 'gemm' and entry['kernels']['gemm'] in ('onednn', 'torch')


def test_a_damaged_line_is_named_with_its_file_and_line(tmp_path):
    path = store.record('s', settings={}, metrics={'x': 1.0}, store=tmp_path, threads=1)
    with open(path, 'a') as f:
        f.write('{"series": "s", "settings": {}, "rounds": {}, "metrics": {"x": 1}}\n' + '{not json\n')
    with pytest.raises(store.RecordError, match=rf'{path.name}:2: the record lacks \[.kind.\]'):
        store.read(tmp_path)
    lines = path.read_text().splitlines()
    path.write_text('\n'.join([lines[0], lines[2]]) + '\n')
    with pytest.raises(store.RecordError, match=rf'{path.name}:2: not JSON'):
        store.read(tmp_path)
    assert json.loads(lines[0])['series'] == 's'   # nothing read was rewritten


def test_the_tests_record_outside_the_committed_store(tmp_path, monkeypatch):
    assert Path(os.environ['ZOO_RECORDS']).resolve() != ROOT / 'records'
    assert store.store_dir() == Path(os.environ['ZOO_RECORDS'])
    monkeypatch.setenv('ZOO_RECORDS', 'off')
    assert store.record('s', settings={}, metrics={'x': 1.0}, threads=1) is None
    monkeypatch.delenv('ZOO_RECORDS')
    assert store.store_dir() == ROOT / 'records'
