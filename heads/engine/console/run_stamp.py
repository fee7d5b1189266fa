"""A timestamp per run of a process: mmengine names a run's logger, message hub, visualizer and default scope
``<config name>_<timestamp>`` (to the second) and hands back the *existing* instance of a name already taken. Two
runs of one config starting within one second in one process (a comparison resuming a run that had nothing left to
train and starting the next, a retry after a damaged log, a train-then-resume in one script) would so share the
first run's logger and visualizer, writing their log and ``scalars.json`` into the first run's work dir, and its
message hub, whose ``best_score`` decides the second run's best checkpoint. :func:`unique_stamp` gives such a run
``<timestamp>_002`` (``_003``, ...) instead, which also names its log folder ``<work_dir>/<timestamp>_002``: it
sorts after the first and before the next second's, as :func:`heads.engine.console.logs.read_scalars` reads the
runs of a work dir in the order of their folders' names."""
from __future__ import annotations

_taken: set[str] = set()  # the stamps runs of this process took


def unique_stamp(timestamp: str) -> str:
    """``timestamp`` if no run of this process took it yet, else it with the first free ``_002``, ``_003``, ...;
    taken from now on. Every process of a distributed run starts the same runs with rank 0's timestamp, so all agree."""
    stamp, count = timestamp, 1
    while stamp in _taken:
        count += 1
        stamp = f'{timestamp}_{count:03d}'
    _taken.add(stamp)
    return stamp
