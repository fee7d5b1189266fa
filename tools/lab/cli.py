"""What the command-line tools share: argument types, progress for long steps and one-line refusals
(:func:`run_main`). Standard library only: a tool parses its arguments (and answers ``--help``) before it imports
torch or anything else heavy."""
from __future__ import annotations

import argparse
import contextlib
import json
import linecache
import sys
import threading
import time
from pathlib import Path

#: where a refusal may come from: this project's packages and the tools (run as __main__ or imported as modules)
PROJECT_PACKAGES = ('zoo', 'heads', 'lab')
TOOLS_DIR = Path(__file__).resolve().parents[1]
#: raised anywhere, these are about the user's files (the message names the path), not the code
FILE_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)
#: raised by a ``raise`` statement of the project, these are its refusals of bad input (a message saying what to fix)
REFUSALS = (ValueError, TypeError, KeyError, LookupError, OSError, FloatingPointError, RuntimeError)
DEBUG_FLAG = '--debug'


def _in_project(module: str, filename: str | None = None) -> bool:
    """Whether code of ``module`` (file ``filename``; default: the module's) is this project's."""
    if module.split('.')[0] in PROJECT_PACKAGES:
        return True
    filename = filename or getattr(sys.modules.get(module), '__file__', None)
    if not filename:
        return False
    try:
        return Path(filename).resolve().is_relative_to(TOOLS_DIR)
    except (OSError, ValueError):
        return False


def is_refusal(err: BaseException) -> bool:
    """Whether ``err`` is a refusal of the user's input (its message is the whole story) rather than a bug: an error
    class of this project (``CheckpointError``, ``ImageError``, ``HFConfigError``, ``ConfigValueError``...), a
    missing/existing/unreadable file, or a standard error (ValueError, TypeError, KeyError, OSError...) raised by a
    ``raise`` statement in the project's code. Anything else, an error raised inside torch or numpy or a failed
    ``assert``, is a bug and keeps its traceback."""
    if isinstance(err, FILE_ERRORS):
        return True
    if _in_project(type(err).__module__):
        return True
    if not isinstance(err, REFUSALS) or isinstance(err, (AssertionError, NotImplementedError, RecursionError)):
        return False
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
    return _in_project(tb.tb_frame.f_globals.get('__name__', ''), code.co_filename) and line.startswith('raise ')


def one_line(err: BaseException) -> str:
    """``err``'s message as the user reads it (a KeyError's without the quotes repr adds), after its class name
    when the class is the project's own (``HFConfigError: ...``, as docs/reliability.md quotes them)."""
    if isinstance(err, KeyError) and len(err.args) == 1 and isinstance(err.args[0], str):
        message = err.args[0]
    else:
        message = str(err) or type(err).__name__
    return f"{type(err).__name__}: {message}" if _in_project(type(err).__module__) else message


def run_main(main, argv: list[str] | None = None):
    """Run a tool's ``main()`` as its ``if __name__ == '__main__':`` entry: a refusal (:func:`is_refusal`) prints
    ``error: <message>`` on stderr and exits with status 2 (as argparse's usage errors); ``--debug`` anywhere in the
    arguments (before a ``--``) is taken out of ``sys.argv`` and lets the refusal through with its full traceback.
    Bugs keep their traceback either way. Returns what ``main`` returns."""
    args = sys.argv if argv is None else argv
    end = args.index('--') if '--' in args else len(args)
    debug = DEBUG_FLAG in args[1:end]
    if debug:
        args[:] = [a for i, a in enumerate(args) if not (a == DEBUG_FLAG and 0 < i < end)]
    try:
        return main()
    except Exception as err:
        if debug or not is_refusal(err):
            raise
        print(f"error: {one_line(err)} ({DEBUG_FLAG} for the traceback)", file=sys.stderr, flush=True)
        sys.exit(2)


def json_object(text: str) -> dict:
    """An argparse ``type`` for keyword-argument options such as ``--backbone-kwargs '{"depth": 2}'``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text!r}") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object like '{{\"depth\": 2}}', got {text!r}")
    return value


def positive(text: str) -> int:
    """An argparse ``type``: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value



def add_run_options(parser: argparse.ArgumentParser, example_key: str, launcher_help: str) -> None:
    """The options tools/train.py and tools/test.py share: ``--compile``, ``--data-root``, ``--cfg-options`` (its
    help shows ``example_key``) and ``--launcher`` (its help says what ``'pytorch'`` does for the tool)."""
    from mmengine.config import DictAction  # mmengine's config only: no torch
    parser.add_argument('--compile', action='store_true',
                        help='torch.compile the backbone and neck (dynamic sizes where they vary; same checkpoints)')
    parser.add_argument('--data-root', help="override every dataset's data_root")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None, metavar='KEY=VALUE',
                        help=f'override config keys, e.g. {example_key}')
    parser.add_argument('--launcher', choices=['none', 'pytorch'], default='none',
                        help=f"'pytorch' under torchrun ({launcher_help})")

@contextlib.contextmanager
def stage(what: str, every: float = 30.0, out=None):
    """Print ``what...`` before a long step, ``still <what>: N s`` every ``every`` seconds while it runs (from a
    background thread), and ``done in N s`` (or ``failed after N s``) at its end: a step with no progress of its
    own, such as an ONNX conversion, is not silent for minutes."""
    out = out or sys.stdout
    print(f'{what}...', file=out, flush=True)
    start, finished = time.perf_counter(), threading.Event()

    def tick():
        while not finished.wait(every):
            print(f'  still {what}: {time.perf_counter() - start:.0f} s', file=out, flush=True)
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        finished.set()
        ticker.join()
        outcome = 'done in' if ok else 'failed after'
        print(f'  {outcome} {time.perf_counter() - start:.1f} s', file=out, flush=True)
