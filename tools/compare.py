"""Compare backbones under one experiment: the same training and evaluation, one table and one plot.

    python tools/compare.py configs/dpt_vitb_camvid.py --backbones vit_base_patch16_224 deit_small_patch16_224 \
        cvt_13_224 coatnet_0_rw_224 crossvit_small_240 --out results/compare_camvid --data-root data/camvid
    python tools/compare.py --configs configs/dpt_vitb_ade20k.py configs/dpt_cvt13_ade20k.py --out results/ade

With ``--backbones`` the config's ``model.backbone`` is replaced by each named zoo backbone (its default taps;
``NAME:{"depth": 4}`` adds options). With ``--configs`` the configs must be identical except ``model.backbone``;
the tool refuses otherwise and lists the keys that differ. Each backbone trains in ``OUT/<name>`` through
mmengine's Runner; a finished backbone is not rerun (its ``result.json`` is read back) and an interrupted one
resumes from its last checkpoint. Writes ``OUT/compare.md``, ``OUT/compare.csv`` and ``OUT/compare.png``
(the validation metric against GMACs and against forward throughput).
"""
from __future__ import annotations

import argparse
import ast
import copy
import csv
import json
import shlex
import sys
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import heads  # noqa: E402,F401  (registers this project's parts)
from heads.engine.config_diff import differing_keys  # noqa: E402
from heads.engine.launch import DictAction, load_config  # noqa: E402
from heads.engine.logs import last_metrics, read_scalars  # noqa: E402
from zoo.profiling import count_macs, count_params, peak_memory, time_forward  # noqa: E402

COLUMNS = ['backbone', 'params_M', 'GMACs', 'forward_img_s', 'train_img_s', 'train_peak_MiB']


def check_only_backbones_differ(configs: dict) -> None:
    """Raise ValueError naming every key outside ``model.backbone`` that differs from the first config."""
    (first_name, first), *rest = configs.items()
    ignored = ('model.backbone', 'work_dir')
    problems = []
    for name, cfg in rest:
        keys = sorted(k for k in differing_keys(first, cfg) if not k.startswith(ignored))
        if keys:
            problems.append(f"{name} vs {first_name}: {', '.join(keys)}")
    if problems:
        raise ValueError("the compared experiments must be identical except model.backbone; these keys differ:\n  "
                         + "\n  ".join(problems))


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


def last_validation(work_dir: Path) -> tuple[dict, float]:
    """The last validation metrics mmengine logged, and the mean seconds per training iteration."""
    scalars = read_scalars(work_dir)
    times = [t for _, t in sorted(scalars['train'].get('time', {}).items())]
    steady = times[1:] or times  # the first logged window includes start-up
    return last_metrics(scalars), (sum(steady) / len(steady) if steady else float('nan'))


def measure(cfg, batch: int) -> dict:
    """Size, cost, inference throughput and training peak memory of the experiment's model at its crop."""
    model = heads.MODELS.build(copy.deepcopy(cfg.model))
    h, w = crop_size(cfg)
    x = torch.randn(batch, 3, h, w)
    model.eval()
    row = {'params_M': count_params(model) / 1e6, 'GMACs': count_macs(model, x[:1]) / 1e9,
           'forward_img_s': batch / time_forward(model, x, warmup=1, iters=3)}
    model.train()
    with peak_memory(x.device) as mem:
        model(x, mode='tensor').float().mean().backward()
    row['train_peak_MiB'] = mem['peak_mib']
    return row


def run_one(name: str, cfg, out: Path) -> dict:
    """Train + evaluate ``cfg`` in ``out/name`` (resuming if interrupted), then measure; cached in result.json."""
    from heads.engine import ZooRunner
    work_dir = out / name
    result_file = work_dir / 'result.json'
    if result_file.exists():
        return json.loads(result_file.read_text())
    work_dir.mkdir(parents=True, exist_ok=True)
    cfg = copy.deepcopy(cfg)
    cfg.work_dir = str(work_dir)
    if (work_dir / 'last_checkpoint').exists():
        cfg.resume, cfg.load_from = True, None
    ZooRunner.from_cfg(cfg).train()
    metrics, seconds_per_iter = last_validation(work_dir)
    batch = cfg.train_dataloader.batch_size
    row = {'backbone': name, **measure(cfg, batch), 'train_img_s': batch / seconds_per_iter, **metrics}
    result_file.write_text(json.dumps(row, indent=1))
    return row


def write_table(rows: list[dict], out: Path, header: str) -> list[str]:
    metric_keys = sorted({k for r in rows for k in r} - set(COLUMNS))
    columns = COLUMNS + metric_keys
    with open(out / 'compare.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    fmt = lambda v: f'{v:.2f}' if isinstance(v, float) else str(v)  # noqa: E731
    lines = [header, '', '| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    lines += ['| ' + ' | '.join(fmt(r.get(c, '')) for c in columns) + ' |' for r in rows]
    (out / 'compare.md').write_text('\n'.join(lines) + '\n')
    return metric_keys


def plot(rows: list[dict], metric: str, out: Path) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in zip(axes, ('GMACs', 'forward_img_s'), ('GMACs at the training crop', 'forward img/s')):
        for r in rows:
            ax.scatter(r[key], r[metric])
            ax.annotate(r['backbone'], (r[key], r[metric]), fontsize=8, xytext=(3, 3), textcoords='offset points')
        ax.set_xlabel(label)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / 'compare.png', dpi=120)
    plt.close(fig)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', nargs='?', help='the experiment whose backbone --backbones replaces')
    parser.add_argument('--backbones', nargs='+', help='zoo names, optionally NAME:{"option": value}')
    parser.add_argument('--configs', nargs='+', help='experiments identical except model.backbone')
    parser.add_argument('--out', default='results/compare', help='output folder (one work dir per backbone)')
    parser.add_argument('--data-root', help="override every dataset's data_root")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None,
                        help='overrides applied to every experiment, e.g. train_cfg.max_iters=200')
    parser.add_argument('--metric', help='the validation metric to plot (default: mIoU, else the first one)')
    args = parser.parse_args(argv)
    if bool(args.backbones) == bool(args.configs) or (args.backbones and not args.config):
        parser.error('give CONFIG --backbones NAME ..., or --configs CONFIG CONFIG ...')
    load = lambda path: load_config(path, args.cfg_options, None, args.data_root)  # noqa: E731
    if args.backbones:
        configs = backbone_configs(load(args.config), args.backbones)
    else:
        configs = {Path(p).stem: load(p) for p in args.configs}
        check_only_backbones_differ(configs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [run_one(name, cfg, out) for name, cfg in tqdm(configs.items(), desc='backbones', unit='run')]
    command = shlex.join(['python', 'tools/compare.py', *(sys.argv[1:] if argv is None else argv)])
    metric_keys = write_table(rows, out, f'```\n{command}\n```')
    metric = args.metric or ('mIoU' if 'mIoU' in metric_keys else (metric_keys or [None])[0])
    if metric:
        plot(rows, metric, out)
    print((out / 'compare.md').read_text())
    return rows


if __name__ == '__main__':
    main()
