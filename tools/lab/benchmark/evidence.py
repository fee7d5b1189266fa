"""Claims of the ViT literature checked at small scale (``tools/evidence.py``, written up in docs/evidence.md).

A claim is a set of arms (configs that differ in one idea), trained over seeds (and, for claim a, over fractions
of the training images), each run through :func:`lab.benchmark.compare.run_one` in
``WORK/<arm>[/f<fraction>]/seed<k>`` and never repeated once its result.json exists for the same settings
(:mod:`lab.benchmark.runs`: a damaged result, or one of other settings, is named and the run redone). A
prerequisite (the CNN teacher, the MAE pre-training) trains first, in ``WORK/<prerequisite>[/seed<k>]``, also
resumable; the arms that need it get its last checkpoint at a config key (and record its settings). Runs go
through a pool of ``jobs`` worker processes, each limited to one thread. The summary (OUT/results.md, .json, .csv
and OUT/<claim>.png) gives per arm (and fraction) the metric's mean, standard deviation and 95% interval over seeds,
and the paired t-test over seeds of every arm against the first one (:mod:`lab.benchmark.stats`), Holm-adjusted
over the claim's comparisons.
"""
from __future__ import annotations

import copy
import csv
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from . import runs as run_folder
from . import stats
from .budget import set_iterations
from .compare import run_one, seeded
from .provenance import check_same_settings, settings
from .tables import markdown


@dataclass
class Claim:
    """What one claim trains and how its result reads."""
    statement: str
    metric: str
    arms: dict[str, str]  # arm -> config path
    fractions: tuple[float, ...] = (1.0,)
    prerequisite: str | None = None  # config trained before the arms that need it
    per_seed_prerequisite: bool = False  # one prerequisite per seed (else one, seed 0)
    needs: dict[str, str] = field(default_factory=dict)  # arm -> config key set to the prerequisite's checkpoint
    data: str = 'camvid'  # which data root the configs read: 'camvid' or 'patches'
    input_size: tuple[int, int] = (128, 160)  # (h, w) at which the arms' GMACs are counted


CLAIMS = {
    'inductive_bias': Claim(
        'Convolutional inductive bias helps with little data: a hybrid (CvT) beats a plain ViT of similar '
        'FLOPs, from scratch, the more so the fewer training images.',
        'mIoU', {'vit_tiny4': 'configs/evidence/dpt_vitt4_camvid.py',
                 'cvt_small': 'configs/evidence/dpt_cvt_camvid.py'},
        fractions=(0.25, 0.5, 1.0)),
    'distillation': Claim(
        'DeiT hard distillation from a CNN teacher helps a small ViT.',
        'top1', {'vit_tiny4': 'configs/evidence/cls_vitt_camvid_patches.py',
                          'deit_tiny4_distilled': 'configs/evidence/cls_deit_distilled_camvid_patches.py'},
        prerequisite='configs/evidence/cls_resnet18_camvid_patches.py', per_seed_prerequisite=False,
        needs={'deit_tiny4_distilled': 'model.distillation.teacher.checkpoint'}, data='patches', input_size=(64, 64)),
    'mae': Claim(
        'MAE pre-training on the unlabeled training images helps the DPT fine-tuned from it.',
        'mIoU', {'scratch': 'configs/evidence/dpt_vitt4_camvid.py', 'mae': 'configs/evidence/dpt_vitt4_camvid.py'},
        prerequisite='configs/evidence/mae_vitt4_camvid.py', needs={'mae': 'model.backbone.pretrained'}),
}
PREREQUISITE = 'prerequisite'


@dataclass
class Run:
    arm: str
    fraction: float
    seed: int
    name: str  # path under the work folder


def plan(claim: Claim, seeds: list[int]) -> tuple[list[Run], list[Run]]:
    """(prerequisite runs, arm runs); a fraction level appears in the names only when the claim has several."""
    pre = []
    if claim.prerequisite:
        pre_seeds = seeds if claim.per_seed_prerequisite else seeds[:1]
        pre = [Run(PREREQUISITE, 1.0, s, f'{PREREQUISITE}/seed{s}') for s in pre_seeds]
    runs = [Run(arm, f, s, '/'.join([arm] + ([f'f{f:g}'] if len(claim.fractions) > 1 else []) + [f'seed{s}']))
            for f in claim.fractions for arm in claim.arms for s in seeds]
    return pre, runs


def checkpoint_of(work: Path, run: Run) -> str:
    """The last checkpoint a finished run wrote (mmengine's ``last_checkpoint`` file names it)."""
    return (work / run.name / 'last_checkpoint').read_text().strip()


@dataclass
class Job:
    """A run with its config and what its provenance adds: the tool's ``options`` that change its result, and the
    config keys left out of its digest (``exclude``: the prerequisite checkpoint's path, recorded as ``options``)."""
    run: Run
    cfg: object
    options: dict = field(default_factory=dict)
    exclude: tuple = ()
    record: dict | None = None  # how the run, once trained, is recorded (lab.records.rows.record_run)

    def expected(self) -> dict:
        """The settings :func:`lab.benchmark.compare.run_one` records for this run (the config as it crosses
        the process boundary)."""
        from mmengine.config import Config
        return settings(Config(self.cfg.to_dict()), {'measure_costs': False, **self.options}, self.exclude)


def train(name: str, cfg_dict: dict, work: str, threads: int | None = None, options: dict | None = None,
          exclude=(), record: dict | None = None) -> dict:
    """One run in this process (the pool's entry point: a plain dict crosses the process boundary)."""
    if threads:
        import torch
        torch.set_num_threads(threads)
    from mmengine.config import Config
    return run_one(name, Config(cfg_dict), Path(work), measure_costs=False, options=options, exclude=exclude,
                   record=record)


def run_all(jobs_: list[Job], work: Path, jobs: int) -> dict[str, dict]:
    """Train every run without a result.json made with its settings (:func:`lab.benchmark.runs.prepare`: a
    damaged one or one of other settings is named and moved aside); returns name -> result row. ``jobs`` > 1:
    that many worker processes with OMP_NUM_THREADS=1 each; 1: in this process."""
    todo = [j for j in jobs_ if run_folder.prepare(work / j.run.name, j.expected()) is None]
    if jobs > 1 and len(todo) > 1:
        os.environ['OMP_NUM_THREADS'] = os.environ['MKL_NUM_THREADS'] = '1'  # inherited by the workers
        with ProcessPoolExecutor(jobs, mp_context=get_context('spawn')) as pool:
            futures = [pool.submit(train, j.run.name, j.cfg.to_dict(), str(work), 1, j.options, j.exclude, j.record)
                       for j in todo]
            for future in futures:
                future.result()  # an error in a run stops here, after the others finished
    else:
        for j in todo:
            train(j.run.name, j.cfg.to_dict(), str(work), options=j.options, exclude=j.exclude, record=j.record)
    return {j.run.name: run_folder.read_result(work / j.run.name / run_folder.RESULT) for j in jobs_}


def execute(claim: Claim, load, seeds: list[int], work: Path, jobs: int = 1, iters: int | None = None,
            record: dict | None = None) -> list[dict]:
    """Train the claim's prerequisite and arms (``load(path)`` -> Config; ``iters``: the arms' schedule length,
    schedulers rescaled, one validation at the end). Independent arms share the pool with the prerequisite; the arms
    that need it follow, recording the prerequisite's settings. Returns one record per arm run: arm, fraction,
    seed, metric; runs of one arm and fraction made with different settings raise ProvenanceError. With ``record``
    (``{'series', 'settings', 'command'}``) each run trained here is recorded with its arm, fraction and config
    added to the settings (:func:`lab.records.rows.record_run`)."""
    pre, runs = plan(claim, seeds)
    rows = {}

    def how(run: Run, config: str) -> dict | None:
        if record is None:
            return None
        cell = {**record['settings'], 'arm': run.arm, 'fraction': run.fraction, 'config': config}
        return {**record, 'settings': cell}

    def job(run: Run) -> Job:
        cfg = copy.deepcopy(load(claim.arms[run.arm]))
        if iters:
            set_iterations(cfg, iters)
            cfg.train_cfg.val_interval = cfg.default_hooks.checkpoint.interval = iters
        if run.fraction != 1.0:
            cfg.train_dataloader.dataset.update(fraction=run.fraction, fraction_seed=0)
        if run.arm not in claim.needs:
            return Job(run, seeded(cfg, run.seed), record=how(run, claim.arms[run.arm]))
        source = next(p for p in pre if p.seed == run.seed or not claim.per_seed_prerequisite)
        cfg.merge_from_dict({claim.needs[run.arm]: checkpoint_of(work, source)})
        made = {k: v for k, v in rows[source.name]['provenance'].items() if k != 'seed'}
        return Job(run, seeded(cfg, run.seed), {'prerequisite': made}, (claim.needs[run.arm],),
                   how(run, claim.arms[run.arm]))

    first = [Job(p, seeded(load(claim.prerequisite), p.seed), record=how(p, claim.prerequisite)) for p in pre]
    first += [job(r) for r in runs if r.arm not in claim.needs]
    rows.update(run_all(first, work, jobs))
    rows.update(run_all([job(r) for r in runs if r.arm in claim.needs], work, jobs))
    for arm in claim.arms:
        for fraction in claim.fractions:
            group = [r for r in runs if r.arm == arm and r.fraction == fraction]
            check_same_settings({str(work / r.name / run_folder.RESULT): rows[r.name]['provenance'] for r in group})
    return [{'arm': r.arm, 'fraction': r.fraction, 'seed': r.seed, claim.metric: rows[r.name].get(claim.metric)}
            for r in runs]


def summarize(records: list[dict], metric: str, arms: list[str], alpha: float = 0.05) -> list[dict]:
    """One row per (fraction, arm): n, mean, std, 95% CI; arms after the first also the paired t-test over seeds of
    arm - first arm (mean difference, p, Holm-adjusted p over all the claim's tests, whether it differs)."""
    rows, tests = [], []
    for fraction in sorted({r['fraction'] for r in records}):
        by_arm = {arm: {r['seed']: r[metric] for r in records
                        if r['arm'] == arm and r['fraction'] == fraction and r[metric] is not None} for arm in arms}
        for arm in arms:
            s = stats.summarize(list(by_arm[arm].values()))
            row = {'fraction': fraction, 'arm': arm, 'n': s['n'], 'mean': s['mean'], 'std': s['std'],
                   'ci_low': s['ci_low'], 'ci_high': s['ci_high']}
            seeds = sorted(set(by_arm[arm]) & set(by_arm[arms[0]]))
            if arm != arms[0] and len(seeds) >= 2:
                test = stats.paired_t_test([by_arm[arm][k] for k in seeds], [by_arm[arms[0]][k] for k in seeds])
                row.update(diff=test['mean_diff'], t=test['t'], p=test['p'])
                tests.append(row)
            rows.append(row)
    for row, adjusted in zip(tests, stats.holm([t['p'] for t in tests])):
        row.update(p_holm=adjusted, differs='yes' if adjusted < alpha else 'no')
    return rows


COLUMNS = ['fraction', 'arm', 'n', 'mean', 'std', 'ci_low', 'ci_high', 'diff', 't', 'p', 'p_holm', 'differs']


def write(rows: list[dict], records: list[dict], out: Path, header: str, extra: str = '') -> None:
    """OUT/results.md (the table, ``extra`` under it), results.csv (the table) and results.json (table + runs)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / 'results.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, COLUMNS, extrasaction='ignore')
        writer.writeheader()
        writer.writerows(rows)
    run_folder.write_json(out / 'results.json', {'summary': rows, 'runs': records})
    table = markdown([{k: ('' if r.get(k) is None else r[k]) for k in COLUMNS} for r in rows], header, COLUMNS, '')
    (out / 'results.md').write_text(table + ('\n' + extra if extra else ''))


def plot(rows: list[dict], records: list[dict], metric: str, out: Path, name: str) -> None:
    """OUT/<name>.png: per fraction (x) and arm (offset), the mean with its 95% interval and the single seeds."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    arms = list(dict.fromkeys(r['arm'] for r in rows))
    fractions = sorted({r['fraction'] for r in rows})
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(fractions), 3.6))
    for i, arm in enumerate(arms):
        dx = (i - (len(arms) - 1) / 2) * 0.15
        mine = [r for r in rows if r['arm'] == arm]
        x = [fractions.index(r['fraction']) + dx for r in mine]
        means = [r['mean'] for r in mine]
        err = [[m - (r['ci_low'] if r['ci_low'] is not None else m) for m, r in zip(means, mine)],
               [(r['ci_high'] if r['ci_high'] is not None else m) - m for m, r in zip(means, mine)]]
        ax.errorbar(x, means, yerr=err, fmt='o', capsize=4, label=arm, color=f'C{i}')
        seeds = [r for r in records if r['arm'] == arm and r[metric] is not None]
        ax.scatter([fractions.index(r['fraction']) + dx + 0.04 for r in seeds], [r[metric] for r in seeds],
                   s=10, alpha=0.4, color=f'C{i}')
    ax.set_xticks(range(len(fractions)), [f'{f:.0%} of the training set' for f in fractions])
    ax.set_xlim(-0.5, len(fractions) - 0.5)
    ax.set_ylabel(f'{metric} (mean, 95% CI; dots: seeds)')
    ax.set_title(name)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f'{name}.png', dpi=120)
    plt.close(fig)


def costs(claim: Claim, load) -> str:
    """Markdown lines: each arm's parameters and GMACs (model and backbone) at the claim's input size."""
    import torch

    from heads.registry import MODELS
    from zoo.profiling import count_macs, count_params
    lines = []
    for arm, path in claim.arms.items():
        model_cfg = copy.deepcopy(load(path).model)
        model_cfg.pop('distillation', None)  # the teacher only trains; it is not part of the model
        model = MODELS.build(model_cfg).eval()
        x = torch.randn(1, 3, *claim.input_size)  # b c h w
        part = getattr(model, 'backbone', None)
        backbone = f', backbone {count_macs(part, x) / 1e9:.3f} GMACs' if part is not None else ''
        lines.append(f'- {arm}: {count_params(model) / 1e6:.2f} M parameters, {count_macs(model, x) / 1e9:.3f} GMACs '
                     f'at {claim.input_size[0]}x{claim.input_size[1]}{backbone}')
    return '\n'.join(lines) + '\n'
