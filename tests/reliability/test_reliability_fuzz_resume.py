"""Issue 36: a bounded fuzz of what a resume reads besides the tensors (hypothesis: derandomized, fixed example
counts, a few seconds): the generator state and kernel choice RngStateHook finds in a checkpoint (its
``torch_rng_state`` and ``meta``), and the checksum sidecar beside a checkpoint. Each input must give a result, a
warning, or one of this project's errors naming the checkpoint (RngStateError, CheckpointError), never a raw
exception. The number of inputs is printed at the end of the module (and asserted)."""
import collections
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heads.engine.checkpoints.rng_state import KEY, RngStateError, RngStateHook
from zoo.runtime import conv_grad
from zoo.weights.checksum import checksum_mismatch, sidecar, sidecar_line
from zoo.weights.io import CheckpointError, read_file

from ..reporting import show

EXAMPLES = {'RngStateHook meta': 400, 'checksum sidecars': 300}
COUNTS: collections.Counter = collections.Counter()
FUZZ = dict(derandomize=True, deadline=None, database=None, print_blob=False,
            suppress_health_check=list(HealthCheck))
NAME = 'work/iter_1.pth'


@pytest.fixture(scope='module', autouse=True)
def _report(request):
    yield
    counts = ', '.join(f"{reader}: {COUNTS[reader]} ({COUNTS[reader, 'refused']} refused, "
                       f"{COUNTS[reader, 'warned']} warned)" for reader in EXAMPLES if COUNTS[reader])
    show(request, f"fuzz: inputs tried: {counts}; raw exceptions: none")


# ------------------------------------------------------------------------------------------ RngStateHook
class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


GOOD_CPU = torch.get_rng_state()
tensors = st.one_of(
    st.just(GOOD_CPU), st.just(torch.zeros(5056, dtype=torch.uint8)),
    st.integers(0, 6000).map(lambda n: torch.randint(0, 256, (n,), dtype=torch.uint8)),
    st.sampled_from([torch.zeros(5056), torch.zeros(2, 2528, dtype=torch.uint8), torch.tensor(3), torch.zeros(0)]))
plain = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.binary(max_size=8))
values = st.recursive(plain | tensors, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=4), inner, max_size=3), max_leaves=6)
kernels = st.sampled_from([None, 'gemm', 'onednn', 'GEMM', '', 'auto']) | values
rng_states = st.one_of(
    values,
    st.fixed_dictionaries({'cpu': tensors | values, 'cuda': st.lists(tensors, max_size=2) | values,
                           'conv_weight_grad': kernels}),
    st.fixed_dictionaries({'cpu': st.just(GOOD_CPU), 'cuda': st.just([]), 'conv_weight_grad': kernels}),
    st.dictionaries(st.sampled_from(['cpu', 'cuda', 'conv_weight_grad', 'x']), tensors | values, max_size=3))
metas = st.one_of(st.fixed_dictionaries({'iter': st.just(1)}), st.fixed_dictionaries({'iter': values}), values)


@settings(max_examples=EXAMPLES['RngStateHook meta'], **FUZZ)
@given(state=rng_states, meta=metas)
def _rng_state_reader(state, meta):
    reader = 'RngStateHook meta'
    COUNTS[reader] += 1
    handler = _Warnings()
    logger = logging.getLogger('fuzz_rng_state')
    logger.addHandler(handler)
    runner = SimpleNamespace(iter=1, logger=logger, checkpoint_being_read=NAME)
    hook = RngStateHook()
    try:
        hook.after_load_checkpoint(runner, {'meta': meta, KEY: state})
        hook.before_train_iter(runner, 0)
    except RngStateError as err:
        assert f"checkpoint {NAME}: {KEY}" in str(err)
        COUNTS[reader, 'refused'] += 1
    finally:
        hook.after_run(runner)
        logger.removeHandler(handler)
    assert conv_grad._pinned is None
    for message in handler.messages:
        assert message.startswith(f"checkpoint {NAME}: its recorded convolution kernel choice")
        COUNTS[reader, 'warned'] += 1


@pytest.mark.slow
def test_rng_state_hook_reads_any_checkpoint_meta_without_a_raw_exception():
    saved = torch.get_rng_state()
    try:
        _rng_state_reader()
    finally:
        torch.set_rng_state(saved)
    assert COUNTS['RngStateHook meta'] == EXAMPLES['RngStateHook meta']


# ------------------------------------------------------------------------------------------ checksum sidecars
def _sidecar_contents(digest: str):
    line = f'{digest}  iter_1.pth\n'.encode()

    def damage(args):
        cut, changes, extra = args
        data = bytearray(line)
        for position, value in changes:
            data[position % len(data)] = value
        return bytes(data[:cut]) + extra
    return st.one_of(st.binary(max_size=200), st.just(line), st.just(line.upper()), st.just(b''),
                     st.tuples(st.integers(0, len(line)), st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)),
                                                                   max_size=4),
                               st.binary(max_size=16)).map(damage))


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp('sidecars') / 'iter_1.pth'
    torch.save({'state_dict': {'w': torch.arange(4.0)}, 'meta': {'iter': 1}}, path)
    return path


def test_any_sidecar_content_gives_a_match_a_mismatch_or_an_error_naming_it(checkpoint):
    reader = 'checksum sidecars'
    good = sidecar_line(checkpoint).split()[0]

    @settings(max_examples=EXAMPLES[reader], **FUZZ)
    @given(content=_sidecar_contents(good) | st.sampled_from(['folder', 'link'] * 2))
    def check(content):
        COUNTS[reader] += 1
        side = sidecar(checkpoint)
        if side.is_dir() and not side.is_symlink():
            side.rmdir()
        else:
            side.unlink(missing_ok=True)
        if content == 'folder':
            side.mkdir()
        elif content == 'link':
            side.symlink_to(checkpoint.parent / 'nowhere')
        else:
            side.write_bytes(content)
        problem = checksum_mismatch(checkpoint)
        assert problem is None or side.name in problem
        if problem is None:  # accepted: the sidecar records this file's digest (nothing else passes as 'verified')
            assert isinstance(content, bytes) and content.strip().lower().startswith(good.encode())
        try:
            read_file(checkpoint)
            assert problem is None
        except CheckpointError as err:
            assert problem is not None and side.name in str(err) and str(checkpoint) in str(err)
            COUNTS[reader, 'refused'] += 1

    check()
    assert COUNTS[reader] == EXAMPLES[reader]
