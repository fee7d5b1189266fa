"""Issue 36: a bounded fuzz of the readers of the result files tools/compare.py and tools/evidence.py read back
(``result.json``, the ``provenance.json`` a run is started with, mmengine's ``scalars.json``): random bytes, valid
files cut short, fields deleted or replaced by JSON values of other types. Each reader must give a result or one of
this project's errors naming the file, never a raw exception (hypothesis: derandomized, fixed example counts). The
number of inputs and outcomes are printed at the end.
"""
import collections
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heads.engine.console.logs import LogFileError, log_records
from lab.benchmark.runs import ResultFileError, read_result, read_started

EXAMPLES = {'result.json': 300, 'provenance.json': 200, 'scalars.json': 300}
OUTCOMES: collections.Counter = collections.Counter()
FUZZ = dict(derandomize=True, deadline=None, database=None, print_blob=False,
            suppress_health_check=list(HealthCheck))

MADE = {'config_digest': 'ab' * 32, 'iters': 2, 'seed': 0, 'options': {'measure_costs': False}}
VALID = {
    'result.json': json.dumps({'backbone': 'vit', 'seed': 0, 'iters': 2, 'mIoU': 9.42, 'train_img_s': None,
                               'provenance': MADE}, indent=1),
    'provenance.json': json.dumps({**MADE, 'config': {'model': {'type': 'Segmentor'}, 'train_cfg': {'max_iters': 2}}},
                                  indent=1),
    'scalars.json': ''.join(json.dumps(r) + '\n' for r in (
        {'lr': 1e-05, 'data_time': 0.002, 'loss': 1.36, 'time': 0.06, 'iter': 1, 'memory': 0, 'step': 1},
        {'lr': 3e-05, 'data_time': 0.004, 'loss': 1.37, 'time': 0.07, 'iter': 2, 'memory': 0, 'step': 2},
        {'aAcc': 38.43, 'mIoU': 9.61, 'mAcc': 25.0, 'data_time': 0.003, 'time': 0.02, 'step': 2})),
}
READERS = {'result.json': (read_result, ResultFileError), 'provenance.json': (read_started, ResultFileError),
           'scalars.json': (log_records, LogFileError)}

values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=3), max_leaves=8)


@st.composite
def damaged(draw, name: str) -> bytes:
    """Random bytes, the valid file cut short, or one of its fields (a line's, for scalars.json) deleted or given
    another JSON value."""
    valid = VALID[name].encode()
    kind = draw(st.sampled_from(['bytes', 'truncated', 'field']))
    if kind == 'bytes':
        return draw(st.binary(max_size=300))
    if kind == 'truncated':
        return valid[:draw(st.integers(0, len(valid) - 1))]
    if name == 'scalars.json':
        lines = VALID[name].splitlines()
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = json.dumps(_mutated(draw, json.loads(lines[i])))
        return ('\n'.join(lines) + '\n').encode()
    return json.dumps(_mutated(draw, json.loads(VALID[name]))).encode()


def _mutated(draw, record: dict):
    """``record`` (or its provenance / config) with a key deleted or set to a drawn value; sometimes the whole
    record replaced."""
    if draw(st.integers(0, 9)) == 0:
        return draw(values)
    target = record
    for nested in ('provenance', 'config'):
        if nested in target and draw(st.booleans()):
            target = target[nested]
    key = draw(st.sampled_from(sorted(target) + ['step', 'extra']))
    if draw(st.booleans()):
        target.pop(key, None)
    else:
        target[key] = draw(values)
    return record


def check(name: str, data: bytes, folder: Path) -> None:
    reader, error = READERS[name]
    path = folder / name
    path.write_bytes(data)
    try:
        reader(path)
    except error as refused:
        assert str(path) in str(refused), f'{name}: the message does not name the file: {refused}'
        OUTCOMES[name, 'refused (file named)'] += 1
    else:
        cut_short = VALID[name].encode().startswith(data) and data != VALID[name].encode()
        # a JSON document cut short never parses; scalars.json cut after a whole record is a shorter log: no damage
        assert not cut_short or (name == 'scalars.json' and data.endswith((b'\n', b'}'))), f'{name}: {data!r} read'
        OUTCOMES[name, 'read'] += 1


@pytest.mark.parametrize('name', list(EXAMPLES))
def test_result_file_readers_name_every_damaged_file(name, tmp_path):
    @settings(max_examples=EXAMPLES[name], **FUZZ)
    @given(data=damaged(name))
    def fuzz(data):
        check(name, data, tmp_path)

    before = sum(n for (reader, _), n in OUTCOMES.items() if reader == name)
    fuzz()
    tried = sum(n for (reader, _), n in OUTCOMES.items() if reader == name) - before
    assert tried >= EXAMPLES[name] * 0.9, f'{name}: only {tried} inputs tried'
    refused = OUTCOMES[name, 'refused (file named)']
    print(f'\n{name}: {tried} inputs, {refused} refused naming the file, {OUTCOMES[name, "read"]} read, '
          f'0 raw exceptions')
    assert refused > tried / 2  # the fuzz reaches the refusals, not only valid files


def test_the_valid_files_the_fuzz_starts_from_are_read(tmp_path):
    for name, (reader, _) in READERS.items():
        (tmp_path / name).write_text(VALID[name])
        assert reader(tmp_path / name)
