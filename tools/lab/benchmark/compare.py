"""Backbones compared under one experiment (``tools/compare.py``): the same training and evaluation per backbone,
then one table (Markdown + CSV) and one plot of the validation metric against cost and speed.

Speeds are only comparable when the machine was equally free for every row: the forward pass is timed in rounds
alternating with a fixed matrix product (:func:`lab.benchmark.dense.forward_against_matmul`), and a row whose
matmul rate is below :data:`BUSY_SHARE` of the best in the table is marked busy (measure it again on a quiet
machine: delete its ``result.json``). A result is read back only for the settings that produced it
(:mod:`lab.benchmark.runs`)."""
from __future__ import annotations

import ast
import copy
import csv
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from heads.engine import ZooRunner
from heads.engine.config.diff import differing_keys
from heads.engine.console.logs import LogFileError, last_metrics, read_scalars
from heads.registry import MODELS
from zoo.profiling import count_macs, count_params, peak_memory
from zoo.runtime import apply_kernel_policy

from . import runs as run_folder
from . import stats
from .budget import budget_iterations, set_iterations
from .dense import forward_against_matmul, forward_fn, output_scalar
from .provenance import canonical_config, check_same_settings, digest, settings
from .tables import markdown

COLUMNS = ['backbone', 'params_M', 'GMACs', 'iters', 'forward_img_s', 'train_img_s', 'train_peak_MiB',
           'matmul_GFLOP_s', 'busy']
#: Columns a row may carry besides COLUMNS and the validation metrics (the seed, a budget's derivation).
EXTRA = ('seeds', 'seed', 'train_TFLOP_per_iter', 'train_s_per_iter')
#: Suffixes of the spread columns a summary over seeds adds next to each metric: the standard deviation over seeds
#: and the half-width of the 95% confidence interval of the mean (mean +- it).
SPREAD = ('_std', '_ci95')
#: A row measured while the matmul rate was below this share of the table's best is marked busy.
BUSY_SHARE = 0.75


#: What compared experiments may differ in: the backbone only, or (``tools/compare.py --heads``) the model, the
#: hooks its training needs (EoMT's mask annealing) and the per-parameter optimizer rules keyed by the model's
#: parameter names (EoMT's queries without weight decay); data, schedule, optimizer and evaluation stay identical.
MAY_DIFFER = {'backbones': ('model.backbone',),
              'heads': ('model.', 'custom_hooks', 'optim_wrapper.paramwise_cfg.custom_keys')}


def check_only_backbones_differ(configs: dict, vary: str = 'backbones') -> None:
    """Raise ValueError naming every key outside what ``vary`` allows (:data:`MAY_DIFFER`) that differs from the
    first config. The model's input normalisation (``model.data_preprocessor``) never may; its padding multiple
    (``size_divisor``, what the model's strides need) may when heads differ."""
    (first_name, first), *rest = configs.items()
    allowed = (*MAY_DIFFER[vary], 'work_dir')
    problems = []
    for name, cfg in rest:
        keys = sorted(k for k in differing_keys(first, cfg) if not k.startswith(allowed) or (
            k.startswith('model.data_preprocessor') and k != 'model.data_preprocessor.size_divisor'))
        if keys:
            problems.append(f"{name} vs {first_name}: {', '.join(keys)}")
    if problems:
        what = 'model.backbone' if vary == 'backbones' else ('the model (data preprocessor aside), custom_hooks and '
                                                             'optim_wrapper.paramwise_cfg.custom_keys')
        raise ValueError(f"the compared experiments must be identical except {what}; these keys differ:\n  "
                         + "\n  ".join(problems))


def config_labels(paths: list) -> list[str]:
    """One distinct run name per config file of ``--configs``, in order: its stem, or where stems collide the
    shortest tail of its path (folders joined by '-') that tells those files apart: ``a/exp.py b/exp.py`` ->
    ``a-exp``, ``b-exp``. A ValueError names a file given twice (also through a link), files no tail of their
    paths tells apart, or a made-up name that is another file's stem. Runs are kept in OUT/<name>, so two files
    under one name would share one work dir, one result and one table row."""
    resolved = [Path(p).resolve() for p in paths]
    for i, path in enumerate(resolved):
        for j in range(i):
            if path == resolved[j]:
                raise ValueError(f"--configs: {paths[j]} and {paths[i]} are the same file {path}; give each config "
                                 f"once")
    tails = [path.with_suffix('').parts[1:] for path in resolved]  # without the root: '/' is no name
    labels = []
    for path, parts in zip(resolved, tails):
        group = [t for r, t in zip(resolved, tails) if r.stem == path.stem]
        for k in range(1, len(parts) + 1):
            if len({t[-k:] for t in group}) == len(group):
                labels.append('-'.join(parts[-k:]))
                break
        else:
            same = [str(p) for p, r in zip(paths, resolved) if r.stem == path.stem]
            raise ValueError(f"--configs: {', '.join(same)} share the name {path.stem!r} and no folder of their paths "
                             f"tells them apart (runs are kept in OUT/<name>); rename one of them")
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise ValueError(f"--configs: {paths[labels.index(label)]} and {paths[i]} would both be run as "
                             f"{label!r} (OUT/{label}); rename one of them")
    return labels


def head_backbone_grid(configs: dict, specs: list[str]) -> dict:
    """Every experiment of ``configs`` (one per head) with every backbone of ``specs``: labels 'config+backbone'."""
    return {f'{stem}+{label}': cfg for stem, base in configs.items()
            for label, cfg in backbone_configs(base, specs).items()}


def parse_backbone(spec: str) -> tuple[str, dict]:
    """'name' or 'name:{"depth": 4}' -> (name, options)."""
    name, _, options = spec.partition(':')
    return name, (ast.literal_eval(options) if options else {})


def backbone_configs(base, specs: list[str]) -> dict:
    configs = {}
    for spec in specs:
        name, options = parse_backbone(spec)
        cfg = copy.deepcopy(base)
        keep = {k: v for k, v in base.model.backbone.items() if k in ('drop_path_rate',)}
        cfg.model.backbone = dict(type='ZooBackbone', name=name, pretrained=None, **keep, **options)
        label = name if name not in configs else f'{name}-{len(configs)}'  # the same backbone with other options
        configs[label] = cfg
    return configs


def crop_size(cfg) -> tuple[int, int]:
    """(h, w) the training pipeline feeds the model: its RandomCrop, else the config's ``crop_size``/``size``."""
    for step in cfg.train_dataloader.dataset.get('pipeline', []):
        if step.get('type') == 'RandomCrop':
            return tuple(step['crop_size'])
    for key in ('crop_size', 'size'):
        if key in cfg:
            return tuple(cfg[key])
    raise ValueError("cannot tell the training crop: add a RandomCrop to the train pipeline or set crop_size")


def quick(cfg, iters: int, val_samples: int) -> None:
    """Shrink an iteration-based experiment in place for a first try: at most ``iters`` training iterations, one
    validation at the end on the first ``val_samples`` samples, one checkpoint."""
    iters = min(cfg.train_cfg.max_iters, iters)
    cfg.train_cfg.update(max_iters=iters, val_interval=iters)
    cfg.default_hooks.checkpoint.interval = iters
    cfg.val_dataloader.dataset.indices = val_samples


def training_seconds_per_iter(runner) -> float | None:
    """Mean seconds of the run's training iterations after its first (which carries the start-up); None when it
    ran fewer than two."""
    times = runner.message_hub.get_scalar('train/time').data[0] if 'train/time' in runner.message_hub.log_scalars \
        else []
    return float(np.mean(times[1:])) if len(times) > 1 else None


def measure(cfg, batch: int) -> dict:
    """Size, cost, inference throughput (with the machine's matmul rate timed in the same rounds) and training
    peak memory of the experiment's model at its crop."""
    model = MODELS.build(copy.deepcopy(cfg.model))
    apply_kernel_policy(model)  # as the runner does
    h, w = crop_size(cfg)
    x = torch.randn(batch, 3, h, w)
    model.eval()
    macs = count_macs(model, x[:1])
    seconds, matmul_rate, _ = forward_against_matmul(forward_fn(model, x, 'fp32'), 2 * macs * batch, x.device,
                                                     'fp32', iters=3, warmup=1)
    row = {'params_M': count_params(model) / 1e6, 'GMACs': macs / 1e9, 'forward_img_s': batch / seconds,
           'matmul_GFLOP_s': matmul_rate}
    model.train()
    with peak_memory(x.device) as mem:
        output_scalar(model(x, mode='tensor')).backward()
    row['train_peak_MiB'] = mem['peak_mib']
    return row


def seeded(cfg, seed: int):
    """A copy of ``cfg`` whose runs draw from ``seed`` (data order, augmentation, initialisation)."""
    cfg = copy.deepcopy(cfg)
    cfg.randomness = {**(cfg.get('randomness') or {}), 'seed': seed}
    return cfg


def run_one(name: str, cfg, out: Path, measure_costs: bool = True, options: dict | None = None,
            exclude=(), record: dict | None = None) -> dict:
    """Train + evaluate ``cfg`` in ``out/name`` (resuming if interrupted), then measure (unless ``measure_costs``
    is False: the costs do not depend on the seed); the row is kept in result.json with the settings that produced
    it (:mod:`lab.benchmark.runs`: ``options``, the tool's options that change the result, and the config keys in
    ``exclude`` go into them as :func:`lab.benchmark.provenance.settings` says), so that a finished run is not
    repeated for the same settings and never read back for others. A damaged log is named and the run redone.
    A run trained here (not one read back) is appended to the results store when ``record`` is given
    (:func:`lab.records.rows.record_run`: ``{'series': ..., 'settings': {...}}``)."""
    work_dir = out / name
    expected = settings(cfg, {'measure_costs': measure_costs, **(options or {})}, exclude)
    for attempt in range(2):
        row = run_folder.prepare(work_dir, expected)
        if row is not None:
            return row
        run_folder.start(work_dir, expected)
        run_cfg = copy.deepcopy(cfg)
        run_cfg.work_dir = str(work_dir)
        if (work_dir / 'last_checkpoint').exists():
            run_cfg.resume, run_cfg.load_from = True, None
        start = time.perf_counter()
        runner = ZooRunner.from_cfg(run_cfg)
        runner.train()
        wall = time.perf_counter() - start
        try:
            metrics = last_metrics(read_scalars(work_dir))
        except LogFileError as error:
            if attempt:
                raise
            run_folder.move_aside(work_dir, str(error))
            continue
        seconds_per_iter = training_seconds_per_iter(runner)
        batch = cfg.train_dataloader.batch_size
        row = {'backbone': name, 'seed': cfg.get('randomness', {}).get('seed'), 'iters': cfg.train_cfg.max_iters,
               **(measure(cfg, batch) if measure_costs else {}),
               'train_img_s': batch / seconds_per_iter if seconds_per_iter else None, **metrics}
        row = run_folder.finish(work_dir, row, expected)
        if record is not None:
            from lab.records.rows import record_run
            record_run(record, row, wall)
        return row


def budgeted(name: str, cfg, out: Path, budget: tuple[str, float | None]) -> tuple[object, dict]:
    """``cfg`` with its schedule set by ``budget`` (:mod:`lab.benchmark.budget`), and the derivation for the table.
    The derivation is kept in OUT/<name>/budget.json with the budget and the config's digest, so that a resumed
    comparison trains to the same length even under a time budget (whose per-iteration time would be measured anew
    otherwise); another budget or config derives it anew (said in a warning)."""
    if budget == ('iters', None):
        return cfg, {}
    record = out / name / 'budget.json'
    basis = {'budget': list(budget), 'config_digest': digest(canonical_config(cfg))}
    derived = None
    if record.exists():
        try:
            derived = json.loads(record.read_text())
            if not isinstance(derived, dict) or not isinstance(derived.get('iters'), int) \
                    or {k: derived.get(k) for k in basis} != basis:
                raise ValueError('it was derived for another budget or config')
        except (ValueError, UnicodeDecodeError) as error:
            warnings.warn(f'{record}: {str(error)[:80]}; deriving the budget anew')
            derived = None
    if derived is None:
        derived = {**budget_iterations(cfg, crop_size(cfg), budget), **basis}
        record.parent.mkdir(parents=True, exist_ok=True)
        run_folder.write_json(record, derived)
    cfg = copy.deepcopy(cfg)
    set_iterations(cfg, derived['iters'])
    return cfg, {k: v for k, v in derived.items() if k not in ('iters', *basis)}


def run_backbone(name: str, cfg, out: Path, seeds: list[int], budget=('iters', None), progress=None,
                 record: dict | None = None) -> tuple:
    """All runs of one backbone: one per seed (in OUT/<name>/seed<k> when there are several, else OUT/<name> with
    the config's own seed), each resumable and never repeated once finished with these settings. Returns (table
    row, per-run rows: each with its 'provenance'); each run trained here is recorded as ``record`` says
    (:func:`run_one`)."""
    cfg, derived = budgeted(name, cfg, out, budget)
    results = []
    for i, seed in enumerate(seeds):
        if len(seeds) == 1:
            row = run_one(name, cfg, out, record=record)
        else:
            row = run_one(f'{name}/seed{seed}', seeded(cfg, seed), out, measure_costs=i == 0, record=record)
        results.append({**row, 'backbone': name, **derived})
        if progress is not None:
            progress.update()
    if len(results) == 1:
        return {k: v for k, v in results[0].items() if k != 'provenance'}, results
    labels = [str(out / name / f'seed{seed}' / run_folder.RESULT) for seed in seeds]
    return summarize_seeds(results, labels), results


def mark_busy(rows: list[dict]) -> None:
    """Set each row's ``busy`` to the share of the table's best matmul rate it was measured at, when below
    :data:`BUSY_SHARE` (else '')."""
    rates = [r['matmul_GFLOP_s'] for r in rows if r.get('matmul_GFLOP_s')]
    for row in rows:
        share = row['matmul_GFLOP_s'] / max(rates) if row.get('matmul_GFLOP_s') else None
        row['busy'] = f'yes: matmul at {share:.0%} of best' if share is not None and share < BUSY_SHARE else ''


def notes(rows: list[dict]) -> list[str]:
    """Explanations of the empty or flagged cells of the table."""
    lines = []
    if any(r.get('train_img_s') is None for r in rows):
        lines.append('- train_img_s is empty where the run timed fewer than two training iterations '
                     '(the first one carries the start-up and is not counted).')
    if any(r.get('busy') for r in rows):
        lines.append(f'- busy: the machine did less than {BUSY_SHARE:.0%} of its best matmul rate while the row was '
                     f'measured; its speeds are not comparable. Delete OUT/<backbone>/result.json and rerun with '
                     f'nothing else running to measure it again.')
    return lines


def metric_names(rows: list[dict]) -> list[str]:
    """The validation metrics in ``rows``: every key that is not a cost column, an extra or a spread column."""
    return sorted({k for r in rows for k in r} - set(COLUMNS) - set(EXTRA) - {'provenance'}
                  - {k for r in rows for k in r if k.endswith(SPREAD)})


def summarize_seeds(runs: list[dict], labels: list[str] | None = None) -> dict:
    """One backbone's runs over seeds as one row: the costs of the run that measured them, the mean training
    speed, and per metric its mean, standard deviation and 95% confidence interval (:func:`stats.summarize`).
    Runs carrying a 'provenance' (named by ``labels``: their result files) must have the same settings but the
    seed (and whether they measured the costs), else ProvenanceError names them and what differs."""
    recorded = {label: {**r['provenance'], 'options': {**r['provenance']['options'], 'measure_costs': None}}
                for label, r in zip(labels or [f'run {i}' for i in range(len(runs))], runs) if 'provenance' in r}
    if recorded:
        check_same_settings(recorded)
    row = {k: v for k, v in next((r for r in runs if 'GMACs' in r), runs[0]).items()
           if k not in ('seed', 'provenance')}
    speeds = [r['train_img_s'] for r in runs if r.get('train_img_s')]
    row['train_img_s'] = sum(speeds) / len(speeds) if speeds else None
    row['seeds'] = len(runs)
    for metric in metric_names(runs):
        summary = stats.summarize([r[metric] for r in runs if r.get(metric) is not None])
        row[metric] = summary['mean']
        row[f'{metric}_std'] = summary['std']
        row[f'{metric}_ci95'] = summary['ci_high'] - summary['mean'] if summary['ci_high'] is not None else None
    return row


def significance_table(runs: dict[str, list[dict]], metric: str, alpha: float = 0.05) -> str:
    """Markdown: every pair of backbones, paired t-test over the seeds both ran, Holm-adjusted (module
    :mod:`lab.benchmark.stats` says why this test)."""
    by_seed = {name: {r['seed']: r[metric] for r in rs if r.get(metric) is not None} for name, rs in runs.items()}
    pairs = stats.pairwise_differences(by_seed, alpha)
    if not pairs:
        return ''
    rows = [{'a': p['a'], 'b': p['b'], 'seeds': p['n'], f'mean {metric} a - b': p['mean_diff'],
             'p': p['p'], 'p (Holm)': p['p_holm'], 'differs': 'yes' if p['differs'] else 'no'} for p in pairs]
    header = (f'Pairs ({metric}): two-sided paired t-test over seeds, p-values Holm-adjusted over the {len(pairs)} '
              f'pairs; "differs" at family-wise alpha = {alpha}.')
    return markdown(rows, header, list(rows[0]))


def write_table(rows: list[dict], out: Path, header: str, appendix: str = '') -> list[str]:
    """compare.csv and compare.md (with :func:`notes` under the table, then ``appendix``); returns the validation
    metrics' names."""
    mark_busy(rows)
    metric_keys = metric_names(rows)
    spread = [m + suffix for m in metric_keys for suffix in SPREAD if any(m + suffix in r for r in rows)]
    extra = [k for k in EXTRA if any(k in r for r in rows)]
    columns = COLUMNS + extra + [c for m in metric_keys for c in (m, *[s for s in spread if s.startswith(m + '_')])]
    with open(out / 'compare.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, columns, extrasaction='ignore')
        writer.writeheader()
        writer.writerows(rows)
    table = markdown([{k: ('' if v is None else v) for k, v in r.items()} for r in rows], header, columns, '')
    explained = notes(rows)
    (out / 'compare.md').write_text(table + ('\n' + '\n'.join(explained) + '\n' if explained else '')
                                    + ('\n' + appendix if appendix else ''))
    return metric_keys


def label_groups(points: list[tuple[float, float, str]], tolerance: float = 0.02) -> list[tuple[float, float, str]]:
    """(x, y, label) points closer than ``tolerance`` of the axes' ranges on both axes merged into one point whose
    label lists theirs, one per line, so that coinciding points' labels do not overlap."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    groups: list[list[tuple[float, float, str]]] = []
    for point in points:
        group = next((g for g in groups if abs(g[0][0] - point[0]) <= tolerance * span_x
                      and abs(g[0][1] - point[1]) <= tolerance * span_y), None)
        if group is None:
            groups.append([point])
        else:
            group.append(point)
    return [(g[0][0], g[0][1], '\n'.join(p[2] for p in g)) for g in groups]


def plot(rows: list[dict], metric: str, out: Path) -> None:
    """compare.png: ``metric`` against GMACs and against forward throughput; over seeds, each point carries its
    95% confidence interval as an error bar."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in zip(axes, ('GMACs', 'forward_img_s'), ('GMACs at the training crop', 'forward img/s')):
        shown = [r for r in rows if r.get(key) is not None and r.get(metric) is not None]
        points = [(r[key], r[metric], r['backbone'] + (' (busy)' if r.get('busy') else '')) for r in shown]
        errors = [r.get(f'{metric}_ci95') or 0.0 for r in shown]
        if any(errors):
            ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=errors, fmt='o', capsize=4)
        else:
            ax.scatter([p[0] for p in points], [p[1] for p in points])
        for x, y, text in label_groups(points) if points else []:
            ax.annotate(text, (x, y), fontsize=8, xytext=(3, 3), textcoords='offset points', va='bottom')
        ax.set_xlabel(label)
        ax.set_ylabel(metric + (' (mean, 95% CI over seeds)' if any(errors) else ''))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / 'compare.png', dpi=120)
    plt.close(fig)
