"""Backfill: the figures committed in docs/benchmarks.md and docs/benchmarks/*.md, parsed into store records.

Every table of a tool's output shape (``tools/benchmark.py``'s backbone, ``--dpt``, ``--depth-anything``, ``--dense``
and ``--sweep`` tables, under their own or the docs' spelled-out headers; ``tools/gpu_check.py``'s step table; the
lines of docs/benchmarks/speed_goals_scripts/gemm_ab.py) becomes one record per row: one run of one
cell, the medians it gives as that run's single round. Each record carries the command printed above the table, the
date and commit of the file (git), its machine kind (named by the file, else :data:`FILE_KINDS` / the section), and
``imported_from``; its ``code`` is None, as the code a pasted figure was measured on is not known, so imported runs of
a cell are aggregated together until a fresh run supersedes them. Tables of another shape, tables measured under
changed settings (:data:`SKIP_MARKERS`), rows with no figures and copies of a row already imported are skipped and
listed, never guessed. The docs are read at :data:`REVISION`, before their tables became rendered blocks.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .store import ROOT

#: The commit whose docs hold the typed tables (the parent of the one that made them rendered blocks).
REVISION = '0098f52'
MACHINES = {
    'cpu-intel-xeon-amx-2c': {'cpu': 'Intel(R) Xeon(R) Processor', 'isa': 'amx', 'cores': 2, 'gpu': None},
    'cpu-amd-epyc-avx512-2c': {'cpu': 'AMD EPYC', 'isa': 'avx512', 'cores': 2, 'gpu': None},
    'cpu-amd-epyc-avx2-2c': {'cpu': 'AMD EPYC', 'isa': 'avx2', 'cores': 2, 'gpu': None},
    'gpu-nvidia-h200': {'cpu': None, 'isa': None, 'cores': None, 'gpu': 'NVIDIA H200'},
}
#: Files whose names do not say their machine: docs/benchmarks.md's "Whole DPT models" section names it (AVX2 EPYC).
FILE_KINDS = {name: 'cpu-amd-epyc-avx2-2c' for name in (
    'dense_models.md', 'dense_deit_small.md', 'dense_vitb_batches.md', 'dense_vitb_dtypes.md',
    'dense_vitb_layouts_checkpointing.md', 'sweep_vitb.md', 'backbones_vs_reference.md')}
#: docs/benchmarks.md: the machine of each section (## or ###) as its text states it; the page's default is the
#: "2 vCPU Firecracker VM" of its first paragraph, the Xeon.
SECTION_KINDS = {'Whole DPT models': 'cpu-amd-epyc-avx2-2c', 'Swin-T, LeViT-256': 'cpu-amd-epyc-avx512-2c'}
#: docs/benchmarks.md sections whose tables copy a file's under other names (dense_models.md, dense_deit_small.md).
COPIED_SECTIONS = ('Every backbone in the same DPT experiment',)
#: Text in a table's section (before it) that says the table ran under other settings than the cell's, or on code
#: a fix the same file records after it changed (gpu_check's first H200 run).
SKIP_MARKERS = ('First run: the compiled forward', 'GLIBC_TUNABLES', 'ATEN_CPU_CAPABILITY',
                'ZOO_CPU_GEMM=onednn', 'Before (commit', 'checkout of',
                "earlier session's machine")
GEMM_AB = re.compile(r'^(?P<model>\w+): batch (?P<batch>\d+), (?P<threads>\d+) threads, (?P<rounds>\d+) rounds; '
                     r'ours MKL (?P<ours>[\d.]+) ms \(timm / ours (?P<ratio>[\d.]+)\).*timm (?P<timm>[\d.]+) ms', re.M)
#: Spelled-out headers -> the tool's column names; 'hf'/'timm'/'transformers' -> 'ref'.
HEADER = {'params_(m)': 'params_M', 'time_ratio': 'ratio', 'gflop_s': 'GFLOP_s', 'gmacs': 'GMACs'}
PASSES = {'forward': 'forward', 'forward (inference)': 'forward', 'training step (fused AdamW)': 'train_step',
          'training step (fused AdamW), checkpointing': 'train_step_checkpointing',
          'forward + backward (train mode)': 'forward_backward',
          'forward + backward, activation checkpointing': 'forward_backward_checkpointing'}
COMMAND = re.compile(r'python3? tools/(?:benchmark|gpu_check)\.py[^`\n\\#]*(?:\\\n[^`\n\\#]*)*')
#: Each series: the header column that names it and the tool's flag in its command.
SERIES = {'ours_img_s': ('benchmark.reference', None), 'pass': ('benchmark.dpt', '--dpt'),
          'ours_s': ('benchmark.depth_anything', '--depth-anything'), 'layout': ('benchmark.dense', '--dense'),
          'backbone_peak_MiB': ('benchmark.sweep', '--sweep'), 'step': ('gpu_check', 'gpu_check.py')}
#: tools/gpu_check.py's rows (step | result | detail): each figure its result and detail state, by its unit.
GPU_FIGURES = {'img_s': r'^([\d.]+) img/s', 'speedup_vs_eager': r'^([\d.]+)x eager', 'TFLOP_s': r'([\d.]+) TFLOP/s =',
               'matmul_pct': r'([\d.]+)% of the matmul rate', 'matmul_TFLOP_s': r'\(([\d.]+) TFLOP/s\)',
               'peak_MiB': r'(?:peak |^)([\d.]+) MiB', 'compiled_img_s': r'([\d.]+) compiled'}
GPU_PASSED = {'ok', 'yes', 'equal'}
#: The text columns a tool's tables have (any other, e.g. 'our Linears', is a setting the series does not hold).
KEYS = {'model', 'dtype', 'pass', 'layout', 'ckpt', 'compile', 'size', 'attention', 'step', 'result', 'detail'}


def git(*args: str) -> str:
    return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def column(name: str) -> str:
    """A header cell in the tool's spelling: 'timm img/s' -> 'ref_img_s', 'ours (s)' -> 'ours_s'."""
    name = name.strip().replace(' (s)', '_s').replace('img/s', 'img_s').replace('GFLOP/s', 'GFLOP_s')
    name = re.sub(r'\s+', '_', name)
    name = re.sub(r'^(hf|timm|transformers|reference)_', 'ref_', name)
    name = HEADER.get(name.lower(), name)
    return name.replace('peak_mib', 'peak_MiB')


def number(text: str) -> float | None:
    try:
        return float(text.strip().strip('*'))
    except ValueError:
        return None


def tables(text: str):
    """Each Markdown table of ``text``: (header, rows, the text of its section (## / ###) up to it, its headings
    ("# a / ## b"), all the text before it, the text since the previous table); a blank line after the header rule
    (as in a tool's output that printed one) does not end the table."""
    lines, headings, section, since, i = text.splitlines(), {}, [], [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('#') and not line.startswith('#!'):
            level = len(line) - len(line.lstrip('#'))
            headings = {k: v for k, v in headings.items() if k < level} | {level: line.lstrip('#').strip()}
            section, since = [], []
        if line.startswith('|') and i + 1 < len(lines) and set(lines[i + 1].replace('|', '').strip()) <= set('-: '):
            header = [column(c) for c in line.strip().strip('|').split('|')]
            before = '\n'.join(lines[:i])
            rows, i = [], i + 2
            while i < len(lines) and (lines[i].startswith('|') or not lines[i].strip() and not rows
                                      and lines[i + 1:i + 2] and lines[i + 1].startswith('|')):
                rows += [[c.strip() for c in lines[i].strip().strip('|').split('|')]] if lines[i].strip() else []
                i += 1
            yield header, rows, '\n'.join(section), ' / '.join(headings.values()), before, '\n'.join(since)
            since = []
            continue
        section.append(line)
        since.append(line)
        i += 1


def size(text: str) -> str:
    return text if 'x' in text else f'{text}x{text}'


def row_record(header: list[str], cells: list[str], command: str) -> dict | None:
    """(series, settings, rounds, metrics) of one row of a tool's table, or None for a table of another shape."""
    row = dict(zip(header, cells))
    values = {k: number(v) for k, v in row.items() if number(v) is not None}
    if any(k not in KEYS and k not in values and v not in ('-', '—') for k, v in row.items()):
        return None
    size_arg = re.search(r'--size (\d+)', command)
    if 'ours_img_s' in row and 'ref_img_s' in row:
        batch = int(values.get('batch', 8))
        settings = {'model': row['model'], 'dtype': row.get('dtype', 'fp32'), 'batch': batch,
                    'size': size(row.get('size') or (size_arg.group(1) if size_arg else '224')), 'mode': 'inference',
                    'reference': 'transformers' if row['model'].startswith('cvt') else 'timm'}
        rounds = {'ours': [batch / values['ours_img_s']], 'reference': [batch / values['ref_img_s']]}
        skip = ('batch', 'size')
    elif 'ours_s' in row and 'pass' in row:
        settings = {'pass': PASSES.get(row['pass'], row['pass']), 'size': size(row.get('size', '512')),
                    'batch': int(values.get('batch', 1)), 'reference': 'transformers'}
        rounds = {'ours': [values['ours_s']]} | ({'reference': [values['ref_s']]} if 'ref_s' in values else {})
        skip = ('batch', 'size', 'ours_s', 'ref_s')
    elif 'ours_s' in row and 'model' in row:
        settings = {'model': row['model'].removeprefix('Depth Anything V2 '), 'dtype': 'fp32',
                    'batch': int(values['batch']), 'size': size(row['size']), 'reference': 'transformers'}
        rounds = {'ours': [values['ours_s']], 'reference': [values['ref_s']]}
        skip = ('batch', 'size', 'ours_s', 'ref_s')
    elif 'fwd_img_s' in row and 'layout' in row:
        settings = {k: row[k] for k in ('model', 'dtype', 'layout', 'ckpt', 'compile', 'size')}
        settings['batch'] = int(values['batch'])
        rounds, skip = {}, ('batch',)
    elif 'step' in row and 'result' in row:
        text = f"{row['result']} | {row.get('detail', '')}"
        metrics = {k: float(m.group(1)) for k, rx in GPU_FIGURES.items() if (m := re.search(rx, text, re.M))}
        if row['result'] in GPU_PASSED:
            metrics['passed'] = 1.0
        dtype = 'fp16' if row['step'] == 'fp16' else 'bf16'
        return {'series': 'gpu_check', 'settings': {'step': row['step'], 'device': 'cuda', 'dtype': dtype},
                'rounds': {}, 'metrics': metrics} if metrics else None
    elif 'backbone_peak_MiB' in row:
        config = re.search(r'--dense (\S+)', command)   # the sweep's model: its config's stem, as the tool names it
        settings = {'model': Path(config.group(1)).stem if config else 'dpt_vitb_ade20k', 'size': size(row['size']),
                    'attention': row['attention'], 'dtype': row['dtype'], 'batch': 1}
        rounds, skip = {'ours': [values['seconds']]}, ('size', 'tokens', 'seconds')
    else:
        return None
    name = next(SERIES[k][0] for k in SERIES if k in row)
    metrics = {k: v for k, v in values.items() if k not in skip}
    return {'series': name, 'settings': settings, 'rounds': rounds, 'metrics': metrics}


def file_kind(path: str, heading: str) -> str:
    """The machine kind of a table: :data:`FILE_KINDS`, docs/benchmarks.md's sections, a heading naming an
    AVX2-only EPYC, else the file's name."""
    name = Path(path).name
    if name in FILE_KINDS:
        return FILE_KINDS[name]
    if name == 'benchmarks.md':
        return next((k for part, k in SECTION_KINDS.items() if part in heading), 'cpu-intel-xeon-amx-2c')
    if 'AVX2 only' in heading:
        return 'cpu-amd-epyc-avx2-2c'
    for part, found in (('nvidia_h200', 'gpu-nvidia-h200'), ('amd_epyc_avx2', 'cpu-amd-epyc-avx2-2c'),
                        ('amd_epyc', 'cpu-amd-epyc-avx512-2c'), ('intel_xeon', 'cpu-intel-xeon-amx-2c')):
        if part in name:
            return found
    return 'cpu-intel-xeon-amx-2c'


def command_of(flag: str | None, model: str, since: str, before: str) -> str:
    """The command printed for a table: of its mode (``flag``), among those since the previous table the first that
    names the row's model, else the last one before it that does; options given alone after it ("`--threads 1
    --iters 20`") are added."""
    def of(text):
        found = [re.sub(r'\s*\\\n\s*', ' ', c).strip() for c in COMMAND.findall(text)]
        found = [c for c in found if (flag in c if flag else 'benchmark.py' in c
                                      and not any(f and f in c for _, f in SERIES.values()))]
        return [c for c in found if model in c.split()] or found
    here, earlier = of(since), of(before)
    command = here[0] if here else earlier[-1] if earlier else ''
    if command and (more := re.search(r'`(--[^`]+)`', since)):
        command += ' ' + more.group(1)
    return command


def gemm_ab(text: str) -> list[dict]:
    """The backbone runs of docs/benchmarks/speed_goals_scripts/gemm_ab.py's lines ('levit_256: batch 8, 2 threads,
    10 rounds; ours MKL 187 ms (timm / ours 1.169), ... timm 214 ms'): ours with MKL's GEMMs, the kernel policy's
    choice on the AVX2 EPYC, the only kind this importer takes them from."""
    found = []
    for m in GEMM_AB.finditer(text):
        batch = int(m['batch'])
        found.append({'series': 'benchmark.reference', 'threads': int(m['threads']),
                      'settings': {'model': m['model'], 'dtype': 'fp32', 'batch': batch, 'size': '224x224',
                                   'mode': 'inference', 'reference': 'timm'},
                      'rounds': {'ours': [float(m['ours']) / 1e3], 'reference': [float(m['timm']) / 1e3]},
                      'metrics': {'ratio': float(m['ratio']), 'rounds': int(m['rounds'])}})
    return found


def import_file(path: str, revision: str = REVISION, skipped: list | None = None) -> list[dict]:
    """The records of one docs file as it was at ``revision``; what is left out is appended to ``skipped``."""
    skipped = [] if skipped is None else skipped
    text = git('show', f'{revision}:{path}')
    date = git('log', '--format=%aI', '-1', revision, '--', path).strip()
    commit = git('log', '--diff-filter=A', '--format=%H', revision, '--', path).split()[-1]
    found = []
    for number_, (header, rows, section, heading, before, since) in enumerate(tables(text), 1):
        flag = next((SERIES[k][1] for k in SERIES if k in header), None)
        where = f'{path} table {number_} ({heading or "top"})'
        if any(marker in section for marker in SKIP_MARKERS) or any(part in heading for part in COPIED_SECTIONS):
            skipped.append(f'{where}: measured under other settings or a copy')
            continue
        kind = file_kind(path, heading)
        for cells in rows:
            command = command_of(flag, cells[0], since, before)
            threads = int(m.group(1)) if (m := re.search(r'--threads (\d+)', command)) else 2
            threads = None if kind.startswith('gpu') else threads
            made = row_record(header, cells, command) if len(cells) == len(header) else None
            if made is None:
                skipped.append(f'{where}: row {cells[0]!r} is not of a tool table')
                continue
            found.append({**made, 'command': command or None, 'date': date, 'commit': commit, 'dirty': False,
                          'code': None, 'versions': {}, 'threads': threads, 'machine': MACHINES[kind], 'kind': kind,
                          'imported_from': path})
    if file_kind(path, '') == 'cpu-amd-epyc-avx2-2c':
        command = next((c for c in re.findall(r'python docs/\S+gemm_ab\.py[^`]*?(?=\n```)', text)), '')
        kind = 'cpu-amd-epyc-avx2-2c'
        found += [{**run, 'command': re.sub(r'\s*\\\n\s*', ' ', command) or None, 'date': date, 'commit': commit,
                   'dirty': False, 'code': None, 'versions': {}, 'machine': MACHINES[kind], 'kind': kind,
                   'imported_from': path} for run in gemm_ab(text)]
    return found


def import_docs(revision: str = REVISION) -> tuple[list[dict], list[str]]:
    """All records of docs/benchmarks/*.md and docs/benchmarks.md (a copy of a row already imported is dropped, its
    command given to the first where that had none) and the list of what was skipped."""
    paths = sorted(p for p in git('ls-tree', '--name-only', revision, 'docs/benchmarks/').split()
                   if p.endswith('.md')) + ['docs/benchmarks.md']
    records, skipped, seen = [], [], {}
    for path in paths:
        for entry in import_file(path, revision, skipped):
            key = repr((entry['series'], entry['settings'], entry['kind'], entry['metrics'], entry['threads']))
            if key in seen:
                first = seen[key]
                first['command'] = first['command'] or entry['command']
                skipped.append(f"{path}: {entry['settings']} is a copy of a row already imported")
                continue
            seen[key] = entry
            records.append(entry)
    return records, skipped
