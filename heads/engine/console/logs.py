"""Reading what mmengine logged in a work dir (``<timestamp>/vis_data/scalars.json`` of each run)."""
from __future__ import annotations

import json
import re
from pathlib import Path

#: Keys of mmengine's records that count, rather than measure.
COUNTERS = ('step', 'iter', 'epoch')
#: Keys that time the run: logged with training and validation records alike, not results.
TIMING = ('time', 'data_time', 'memory')
#: Validation metrics' possible ranges: percentages (IoUMetric, AccuracyMetric) and fractions (DepthMetric's
#: threshold accuracies d1..d3, pycocotools' average precision and recall).
PERCENT_METRICS = re.compile(r'^(aAcc|mIoU|mAcc|mDice|mFscore|top\d+)$')
FRACTION_METRICS = re.compile(r'^(d[123]|.*(mAP|AP|AR)(_\w+)?)$')


class LogFileError(ValueError):
    """A ``scalars.json`` that is not what mmengine writes: empty, truncated, not UTF-8, or a line that is not a
    JSON object with an integer ``step``."""


def _damaged(path: Path, what: str) -> LogFileError:
    return LogFileError(f"{path} is damaged: {what}. mmengine writes one JSON object with an integer 'step' per line; "
                        f"a crash or a full disk can cut the file short. Move the run's folder aside and train it "
                        f"again (tools/compare.py and tools/evidence.py do so themselves)")


def log_records(path: Path) -> list[dict]:
    """The records of one ``scalars.json``; LogFileError naming the file (and line) when it is damaged."""
    try:
        text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError as error:
        raise _damaged(path, f'not UTF-8 text (byte {error.start})') from None
    if not text.strip():
        raise _damaged(path, 'it is empty')
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            raise _damaged(path, f'line {number} is not a JSON object (cut short?): {line[:60]!r}') from None
        step = record.get('step') if isinstance(record, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise _damaged(path, f"line {number} is not an object with an integer 'step': {line[:60]!r}")
        records.append(record)
    return records


def read_scalars(work_dir) -> dict[str, dict[str, dict[int, float]]]:
    """``{'train': {key: {step: value}}, 'val': {key: {step: value}}}`` over every run in ``work_dir`` in the
    order of the runs (a resumed run continues the steps of the one before; a step logged again replaces the
    older value). Training records are those with a loss; the others are validation results. A damaged log
    raises LogFileError naming it."""
    runs = sorted(Path(work_dir).glob('*/vis_data/scalars.json'))
    if not runs:
        raise FileNotFoundError(f"no mmengine log in {work_dir}: expected {work_dir}/<timestamp>/vis_data/"
                                f"scalars.json, written by tools/train.py")
    series: dict[str, dict[str, dict[int, float]]] = {'train': {}, 'val': {}}
    for scalars in runs:
        for record in log_records(scalars):
            part = series['train' if any('loss' in key for key in record) else 'val']
            for key, value in record.items():
                if key not in COUNTERS and isinstance(value, (int, float)):
                    part.setdefault(key, {})[record['step']] = float(value)
    return series


def metric_names(scalars: dict) -> list[str]:
    """The validation metrics of :func:`read_scalars`'s result (its timing keys left out)."""
    return sorted(key for key in scalars['val'] if key not in TIMING)


def last_metrics(scalars: dict) -> dict[str, float]:
    """Each validation metric at the last step it was logged."""
    return {key: scalars['val'][key][max(scalars['val'][key])] for key in metric_names(scalars)}


def metric_bounds(name: str) -> tuple[float, float] | None:
    """The range a validation metric lies in by its definition: (0, 100) for percentages, (0, 1) for fractions,
    None when unbounded or unknown."""
    name = name.split('/')[-1]
    if PERCENT_METRICS.match(name):
        return 0.0, 100.0
    if FRACTION_METRICS.match(name):
        return 0.0, 1.0
    return None
