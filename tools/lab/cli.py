"""What the command-line tools share: argument types and progress for long steps. Standard library only: a tool
parses its arguments (and answers ``--help``) before it imports torch or anything else heavy."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time


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
