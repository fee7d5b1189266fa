"""What mmengine logged in a work dir: per-iteration training losses and the last validation metrics."""
from pathlib import Path

from heads.engine.console.logs import last_metrics, read_scalars


def logged(work_dir: Path) -> tuple[dict, dict]:
    """{iteration: training loss} and the last validation metrics over every run in ``work_dir`` (a resumed run
    adds its iterations to those of the first)."""
    scalars = read_scalars(work_dir)
    return scalars['train'].get('loss', {}), last_metrics(scalars)
