"""What a user sees of a run, and reads afterwards: the short console (everything else goes to the log file,
:mod:`.essentials`), progress from the first iterations with an ETA (:mod:`.progress`), and the scalars mmengine
logged in a work dir (:mod:`.logs`)."""
from .essentials import run_summary, show_essentials_on_console
from .logs import LogFileError, last_metrics, metric_bounds, metric_names, read_scalars
from .progress import EtaTimerHook, ProgressLoggerHook

__all__ = ['EtaTimerHook', 'LogFileError', 'ProgressLoggerHook', 'last_metrics', 'metric_bounds', 'metric_names',
           'read_scalars', 'run_summary', 'show_essentials_on_console']
