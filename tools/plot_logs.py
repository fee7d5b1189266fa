"""Training curves of one or several runs from mmengine's logs, in one PNG.

    python tools/plot_logs.py work_dirs/dpt_vitt4_camvid_cpu --out curves.png
    python tools/plot_logs.py results/compare_camvid/* --metrics mIoU aAcc --out compare_curves.png

Panels: the training loss (every loss term logged, light, with a moving average over ``--smooth`` logged
points, dark), the learning rate, and each validation metric, against the iteration. Runs are told apart by
colour and named by their work dir. Resumed runs are read as one (every ``<timestamp>/vis_data/scalars.json``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from lab.outputs import refuse_outputs_that_are_inputs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('work_dirs', nargs='+', help='work dirs of training runs (tools/train.py --work-dir)')
    parser.add_argument('--metrics', nargs='+', help='validation metrics to plot (default: all logged)')
    parser.add_argument('--smooth', type=int, default=10, help='moving-average window over logged loss points')
    parser.add_argument('--out', default='curves.png', help='the PNG to write (default: %(default)s)')
    return parser


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    starts = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    return (sums[1:] - sums[starts]) / (np.arange(1, len(values) + 1) - starts)


def curve(series: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    steps = np.array(sorted(series))
    return steps, np.array([series[s] for s in steps])


def loss_terms(train: dict) -> dict[str, list[str]]:
    """Loss keys to draw -> the logged keys each stands for: a term equal to the total at every step (a model with
    one loss logs 'loss' and 'loss_ce' alike) is drawn once, as the total, rather than hidden behind it."""
    keys = sorted(k for k in train if k.startswith('loss'))
    drawn = {k: [k] for k in keys}
    total = train.get('loss')
    for key in keys:
        if key != 'loss' and total is not None and train[key].keys() == total.keys() and \
                np.allclose([train[key][s] for s in total], list(total.values())):
            drawn['loss'].append(drawn.pop(key)[0])
    return drawn


def plot(runs: dict[str, dict], metrics: list[str] | None, smooth: int, out: Path) -> dict[str, tuple]:
    """Write the curves to ``out``; returns each validation metric's y-axis range."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from heads.engine.console.logs import metric_bounds, metric_names
    names = metrics or sorted({key for scalars in runs.values() for key in metric_names(scalars)})
    fig, axes = plt.subplots(1, 2 + len(names), figsize=(4.2 * (2 + len(names)), 3.4), squeeze=False)
    loss_ax, lr_ax, *metric_axes = axes[0]
    for colour, (run, scalars) in zip(plt.cm.tab10.colors * 10, runs.items()):
        for key, same in loss_terms(scalars['train']).items():
            steps, values = curve(scalars['train'][key])
            label = f"{run} {' = '.join(same)}"
            loss_ax.plot(steps, values, color=colour, alpha=0.25, linewidth=0.8)
            loss_ax.plot(steps, moving_average(values, smooth), color=colour, label=label,
                         linestyle='-' if key == 'loss' else ':')
        if 'lr' in scalars['train']:
            lr_ax.plot(*curve(scalars['train']['lr']), color=colour, label=run)
        for ax, name in zip(metric_axes, names):
            if name in scalars['val']:
                steps, values = curve(scalars['val'][name])
                ax.plot(steps, values, color=colour, marker='o', markersize=3 if len(steps) > 1 else 6, label=run)
                if len(steps) == 1:  # one validation: its value written next to the point
                    ax.annotate(f'{values[0]:.4g}', (steps[0], values[0]), xytext=(5, 5), textcoords='offset points',
                                color=colour, fontsize=8)
    for ax, title in zip(axes[0], ['training loss', 'learning rate', *(f'validation {n}' for n in names)]):
        ax.set_title(title)
        ax.set_xlabel('iteration')
        ax.grid(alpha=0.3)
    for ax, name in zip(metric_axes, names):  # never beyond what the metric can be (e.g. 100 %)
        bounds = metric_bounds(name)
        if bounds:
            low, high = ax.get_ylim()
            ax.set_ylim(max(low, bounds[0]), min(high, bounds[1]))
    loss_ax.legend(fontsize=7)
    lr_ax.ticklabel_format(axis='y', style='sci', scilimits=(-3, 3))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return {name: ax.get_ylim() for ax, name in zip(metric_axes, names)}


def main(argv=None) -> dict[str, dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs = {str(p): p for d in args.work_dirs for p in Path(d).glob('*/vis_data/scalars.json')}  # what it reads
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out},
                                   {**{f'WORK_DIR {d}': d for d in args.work_dirs}, **logs})
    from heads.engine.console.logs import read_scalars
    runs = {Path(work_dir).name: read_scalars(work_dir) for work_dir in args.work_dirs}
    plot(runs, args.metrics, args.smooth, Path(args.out))
    print(f"{len(runs)} run(s) -> {args.out}")
    return runs


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
