"""Training curves of one or several runs from mmengine's logs, in one PNG.

    python tools/plot_logs.py work_dirs/dpt_vitt4_camvid_cpu --out curves.png
    python tools/plot_logs.py results/compare_camvid/* --metrics mIoU aAcc --out compare_curves.png

Panels: the training loss (every loss term logged, light, with a moving average over ``--smooth`` logged
points, dark), the learning rate, and each validation metric, against the iteration. Runs are told apart by
colour and named by their work dir. Resumed runs are read as one (every ``<timestamp>/vis_data/scalars.json``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from heads.engine.logs import metric_names, read_scalars  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('work_dirs', nargs='+')
    parser.add_argument('--metrics', nargs='+', help='validation metrics to plot (default: all logged)')
    parser.add_argument('--smooth', type=int, default=10, help='moving-average window over logged loss points')
    parser.add_argument('--out', default='curves.png')
    return parser.parse_args(argv)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    starts = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    return (sums[1:] - sums[starts]) / (np.arange(1, len(values) + 1) - starts)


def curve(series: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    steps = np.array(sorted(series))
    return steps, np.array([series[s] for s in steps])


def plot(runs: dict[str, dict], metrics: list[str] | None, smooth: int, out: Path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    names = metrics or sorted({key for scalars in runs.values() for key in metric_names(scalars)})
    fig, axes = plt.subplots(1, 2 + len(names), figsize=(4.2 * (2 + len(names)), 3.4), squeeze=False)
    loss_ax, lr_ax, *metric_axes = axes[0]
    for colour, (run, scalars) in zip(plt.cm.tab10.colors * 10, runs.items()):
        for key in sorted(k for k in scalars['train'] if k.startswith('loss')):
            steps, values = curve(scalars['train'][key])
            label = f'{run} {key}'
            loss_ax.plot(steps, values, color=colour, alpha=0.25, linewidth=0.8)
            loss_ax.plot(steps, moving_average(values, smooth), color=colour, label=label,
                         linestyle='-' if key == 'loss' else ':')
        if 'lr' in scalars['train']:
            lr_ax.plot(*curve(scalars['train']['lr']), color=colour, label=run)
        for ax, name in zip(metric_axes, names):
            if name in scalars['val']:
                ax.plot(*curve(scalars['val'][name]), color=colour, marker='o', markersize=3, label=run)
    for ax, title in zip(axes[0], ['training loss', 'learning rate', *(f'validation {n}' for n in names)]):
        ax.set_title(title)
        ax.set_xlabel('iteration')
        ax.grid(alpha=0.3)
    loss_ax.legend(fontsize=7)
    lr_ax.ticklabel_format(axis='y', style='sci', scilimits=(-3, 3))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict[str, dict]:
    args = parse_args(argv)
    runs = {Path(work_dir).name: read_scalars(work_dir) for work_dir in args.work_dirs}
    plot(runs, args.metrics, args.smooth, Path(args.out))
    print(f"{len(runs)} run(s) -> {args.out}")
    return runs


if __name__ == '__main__':
    main()
