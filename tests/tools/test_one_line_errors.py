"""Every tool's refusal of bad input is one line on stderr, ``error: <message>`` (``error: HFConfigError: <message>``
for the project's own error classes), with exit status 2 (as argparse's usage errors); ``--debug`` gives the full
traceback; a bug (an error raised inside a library, a failed assert) keeps its traceback (tools/lab/cli.py's
``run_main``, the ``if __name__ == '__main__':`` entry of every tool)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from heads.io.pointcloud import read_ply
from lab.cli import is_refusal, run_main
from zoo.weights import CheckpointError

ROOT = Path(__file__).resolve().parents[2]
TOOLS = sorted(p.stem for p in (ROOT / 'tools').glob('*.py'))


def tool(*args):
    return subprocess.run([sys.executable, str(ROOT / 'tools' / args[0]), *args[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_every_tool_enters_through_run_main():
    for name in TOOLS:
        entry = (ROOT / 'tools' / f'{name}.py').read_text().split("if __name__ == '__main__':", 1)[1]
        assert 'run_main(main)' in entry, f'{name}: its __main__ entry does not go through lab.cli.run_main'


def test_refusals_are_told_from_bugs(tmp_path):
    def raises(error):
        try:
            error()
        except Exception as err:
            return err
    bad_ply = tmp_path / 'bad.ply'
    bad_ply.write_bytes(b'ply\nformat binary_little_endian 1.0\nelement vertex lots\nend_header\n')
    assert is_refusal(raises(lambda: read_ply(bad_ply)))  # a ValueError raised by the project's own check
    assert is_refusal(CheckpointError('x'))  # a class of the project's, wherever raised
    assert is_refusal(raises(lambda: open(tmp_path / 'missing.txt')))  # the path is in the message
    assert not is_refusal(raises(lambda: np.zeros(2) + np.zeros(3)))  # raised inside numpy: a bug
    assert not is_refusal(raises(lambda: {}['key']))  # no raise statement of the project: a bug
    assert not is_refusal(AssertionError('x'))


def test_run_main_prints_one_line_and_debug_gives_the_traceback(tmp_path, capsys):
    bad_ply = tmp_path / 'bad.ply'
    bad_ply.write_bytes(b'ply\nformat binary_little_endian 1.0\nelement vertex\nend_header\n')
    with pytest.raises(SystemExit) as done:
        run_main(lambda: read_ply(bad_ply), ['tool.py', 'x'])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith(f"error: {bad_ply}: header line 'element vertex' is not")
    argv = ['tool.py', 'x', '--debug', '--', '--debug']
    with pytest.raises(ValueError, match='header line'):
        run_main(lambda: read_ply(bad_ply), argv)
    assert argv == ['tool.py', 'x', '--', '--debug']  # taken out before the tool parses its arguments
    with pytest.raises(ValueError, match='operands could not be broadcast'):  # a bug: its traceback stays
        run_main(lambda: np.zeros(2) + np.zeros(3), ['tool.py'])
    assert run_main(lambda: 7, ['tool.py']) == 7


@pytest.mark.slow
def test_tools_refuse_bad_input_in_one_line(tmp_path):
    """An unknown backbone name (list_models.py) and a config.json whose model_type is a list (convert_weights.py)
    printed a traceback of 20-40 lines: now one, naming the problem; --debug gives the traceback back."""
    done = tool('list_models.py', 'vit_bse_patch16_224')
    assert done.returncode == 2 and done.stderr.count('\n') == 1, done.stderr[-2000:]
    assert done.stderr.startswith('error: UnknownModelError: unknown backbone') and 'did you mean' in done.stderr
    (tmp_path / 'config.json').write_text(json.dumps({'model_type': ['dpt']}))
    done = tool('convert_weights.py', 'hf-dpt', str(tmp_path), str(tmp_path / 'out'))
    assert done.returncode == 2 and done.stderr.count('\n') == 1, done.stderr[-2000:]
    assert done.stderr.startswith(f"error: HFConfigError: {tmp_path / 'config.json'}: field 'model_type' must be")
    done = tool('convert_weights.py', 'hf-dpt', str(tmp_path), str(tmp_path / 'out'), '--debug')
    assert done.returncode == 1 and 'Traceback (most recent call last)' in done.stderr
    assert "HFConfigError: " in done.stderr.splitlines()[-1]
