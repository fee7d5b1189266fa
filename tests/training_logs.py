"""What mmengine logged in a work dir: per-iteration training losses and the last validation metrics."""
import json
from pathlib import Path


def logged(work_dir: Path) -> tuple[dict, dict]:
    """{iteration: training loss} and the last validation metrics, from every run's scalars.json in
    ``work_dir`` in the order of the runs (a resumed run adds its iterations to those of the first)."""
    losses, metrics = {}, {}
    for scalars in sorted(Path(work_dir).glob('*/vis_data/scalars.json')):
        for line in scalars.read_text().splitlines():
            record = json.loads(line)
            if 'loss' in record:
                losses[record['step']] = record['loss']
            if 'mIoU' in record:
                metrics = {k: v for k, v in record.items() if k not in ('step', 'data_time', 'time')}
    return losses, metrics
