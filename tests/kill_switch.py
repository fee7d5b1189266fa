"""Run tools/train.py and SIGKILL the process at a chosen moment (the fault injection of the resume tests).

    python tests/kill_switch.py after-iter N  TRAIN_ARGS...   # killed right after iteration N finished
    python tests/kill_switch.py mid-write NAME TRAIN_ARGS...   # killed halfway through writing file NAME

Only mmengine's loop and its file write are wrapped, to pick the moment; the training code runs as it is.
"""
import os
import signal
import sys
from pathlib import Path

from mmengine.fileio.backends import LocalBackend
from mmengine.runner.loops import IterBasedTrainLoop

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
import train


def kill_self():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def kill_after_iter(n: int):
    run_iter = IterBasedTrainLoop.run_iter

    def wrapped(loop, data_batch):
        run_iter(loop, data_batch)
        if loop.iter == n:  # run_iter has counted the iteration (hooks, checkpoint included)
            kill_self()
    IterBasedTrainLoop.run_iter = wrapped


def kill_mid_write(name: str):
    put = LocalBackend.put

    def wrapped(backend, obj, filepath):
        if Path(filepath).name.startswith(name):
            with open(filepath, 'wb') as f:
                f.write(obj[:len(obj) // 2])
            kill_self()
        put(backend, obj, filepath)
    LocalBackend.put = wrapped


if __name__ == '__main__':
    mode, arg, *train_args = sys.argv[1:]
    {'after-iter': lambda: kill_after_iter(int(arg)), 'mid-write': lambda: kill_mid_write(arg)}[mode]()
    train.main(train_args)
