"""tools/evidence.py: training on a fraction of a dataset, resuming a claim after an interruption, and the table
assembled from result.json files (the statistics themselves are checked in test_compare_statistics.py)."""
import json
import math
from pathlib import Path

import pytest
from mmengine.config import Config

from heads.datasets import SyntheticScenes
from heads.datasets.base import fraction_indices
from lab.benchmark import evidence, runs
from lab.benchmark.compare import seeded

from .records import own_store, series_records

ROOT = Path(__file__).resolve().parents[2]


def test_fraction_keeps_a_seeded_nested_subset():
    full = fraction_indices(367, 1.0)
    assert full == list(range(367))
    sizes = {f: len(fraction_indices(367, f, seed=0)) for f in (0.25, 0.5)}
    assert sizes == {0.25: math.ceil(0.25 * 367), 0.5: math.ceil(0.5 * 367)}  # 92, 184
    quarter, half = set(fraction_indices(367, 0.25, seed=0)), set(fraction_indices(367, 0.5, seed=0))
    assert quarter < half  # nested for one seed
    assert fraction_indices(367, 0.25, seed=0) == sorted(quarter)  # original order kept
    assert fraction_indices(367, 0.25, seed=0) == fraction_indices(367, 0.25, seed=0)  # deterministic
    assert fraction_indices(367, 0.25, seed=1) != fraction_indices(367, 0.25, seed=0)
    assert len(fraction_indices(10, 0.01)) == 1  # never empty


@pytest.mark.slow
def test_dataset_fraction_selects_the_same_samples_and_rejects_bad_values():
    full = SyntheticScenes(num_samples=20, seed=0)
    part = SyntheticScenes(num_samples=20, seed=0, fraction=0.25, fraction_seed=3)
    again = SyntheticScenes(num_samples=20, seed=0, fraction=0.25, fraction_seed=3)
    assert len(full) == 20 and len(part) == 5
    kept = [part.get_data_info(i)['scene_index'] for i in range(len(part))]
    assert kept == [again.get_data_info(i)['scene_index'] for i in range(len(again))]
    assert kept == fraction_indices(20, 0.25, seed=3)
    for bad in (0, 0.0, -0.5, 1.5, 'half', True):
        with pytest.raises(ValueError, match='fraction must be a number in'):
            SyntheticScenes(num_samples=20, fraction=bad)


def tiny(tmp_path: Path) -> str:
    """configs/quickstart.py at a toy size: 2 iterations, 4 validation scenes."""
    path = tmp_path / 'tiny.py'
    path.write_text(f"_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']\n"
                    "size = (32, 32)\n"
                    "model = dict(backbone=dict(img_size=size, embed_dim=32, num_heads=2), "
                    "neck=dict(hidden_channels=(8, 8, 8, 8), fusion_channels=8), decode_head=dict(in_channels=8))\n"
                    "train_dataloader = dict(batch_size=2, dataset=dict(num_samples=8, size=size))\n"
                    "val_dataloader = dict(batch_size=4, dataset=dict(num_samples=4, size=size))\n"
                    "train_cfg = dict(max_iters=2, val_interval=2)\n"
                    "default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))\n")
    return str(path)


def test_plan_names_runs_by_arm_fraction_and_seed():
    claim = evidence.Claim('toy', 'mIoU', {'a': 'a.py', 'b': 'b.py'}, fractions=(0.25, 1.0), prerequisite='p.py')
    pre, runs = evidence.plan(claim, [0, 1])
    assert [p.name for p in pre] == ['prerequisite/seed0']  # one prerequisite unless per_seed_prerequisite
    assert [r.name for r in runs] == ['a/f0.25/seed0', 'a/f0.25/seed1', 'b/f0.25/seed0', 'b/f0.25/seed1',
                                      'a/f1/seed0', 'a/f1/seed1', 'b/f1/seed0', 'b/f1/seed1']
    claim = evidence.Claim('toy', 'mIoU', {'a': 'a.py'}, prerequisite='p.py', per_seed_prerequisite=True)
    pre, runs = evidence.plan(claim, [3, 4])
    assert [p.name for p in pre] == ['prerequisite/seed3', 'prerequisite/seed4']
    assert [r.name for r in runs] == ['a/seed3', 'a/seed4']


@pytest.mark.slow
def test_an_interrupted_claim_reruns_only_the_missing_runs(tmp_path, monkeypatch):
    """... and each run trained, not one read back, is recorded (series evidence) with its arm and metric."""
    folder = own_store(monkeypatch, tmp_path)
    record = {'series': 'evidence', 'settings': {'claim': 'toy'}, 'command': 'python tools/evidence.py toy'}
    config = tiny(tmp_path)
    claim = evidence.Claim('toy', 'mIoU', {'a': config, 'b': config}, prerequisite=config, needs={'b': 'load_from'})
    load = lambda path: Config.fromfile(path)  # noqa: E731
    trained = []
    real_train = evidence.train
    monkeypatch.setattr(evidence, 'train', lambda name, *a, **k: trained.append(name) or real_train(name, *a, **k))
    work = tmp_path / 'work'
    records = evidence.execute(claim, load, [0], work, record=record)
    assert trained == ['prerequisite/seed0', 'a/seed0', 'b/seed0']
    assert len(records) == 2 and all(r['mIoU'] is not None for r in records)
    recorded = series_records(folder, 'evidence')
    assert [r['settings'] for r in recorded] == [
        {'claim': 'toy', 'arm': arm, 'fraction': 1.0, 'config': config, 'iters': 2, 'seed': 0}
        for arm in ('prerequisite', 'a', 'b')]
    assert [r['metrics']['mIoU'] for r in recorded[1:]] == [r['mIoU'] for r in records]
    assert all(r['metrics']['wall_s'] > 0 and r['command'] == record['command'] for r in recorded)
    # arm b started from the prerequisite's checkpoint
    logged = next((work / 'b' / 'seed0').glob('*/vis_data/config.py')).read_text()
    assert str(work / 'prerequisite' / 'seed0' / 'iter_2.pth') in logged
    # an interruption: two runs lost their result (one of them keeps its checkpoint, as if killed before the end)
    (work / 'a' / 'seed0' / 'result.json').unlink()
    (work / 'b' / 'seed0' / 'result.json').unlink()
    trained.clear()
    assert evidence.execute(claim, load, [0], work, record=record) == records
    assert trained == ['a/seed0', 'b/seed0']  # the prerequisite is not trained again
    assert [r['settings']['arm'] for r in series_records(folder, 'evidence')[3:]] == ['a', 'b']
    trained.clear()
    evidence.execute(claim, load, [0], work, record=record)
    assert trained == [] and len(series_records(folder, 'evidence')) == 5  # nothing read back is recorded


def write_result(folder: Path, metric: float, seed: int) -> None:
    """A result.json as tools/evidence.py writes it for an arm of an empty config at ``seed``."""
    folder.mkdir(parents=True)
    job = evidence.Job(evidence.Run('a', 1.0, seed, ''), seeded(Config({}), seed))
    runs.finish(folder, {'mIoU': metric}, job.expected())


def test_table_from_result_files(tmp_path):
    # arm a: 10, 12, 14; arm b: 11, 15, 16 (seeds 0, 1, 2). Worked by hand:
    # a: mean 12, std 2, CI 12 +- t(0.975, 2) * 2 / sqrt(3) = 12 +- 4.302653 * 1.154701 = 12 +- 4.968275
    # b - a: 1, 3, 2 -> mean 2, std 1, t = 2 / (1 / sqrt(3)) = 3.464102, two-sided p (df 2) = 0.074180
    # (p = 1 - t / sqrt(t^2 + 2) for df 2: 1 - 3.464102 / 3.741657 = 0.074180)
    claim = evidence.Claim('toy', 'mIoU', {'a': 'unused.py', 'b': 'unused.py'})
    for arm, values in {'a': (10, 12, 14), 'b': (11, 15, 16)}.items():
        for seed, value in enumerate(values):
            write_result(tmp_path / arm / f'seed{seed}', value, seed)
    records = evidence.execute(claim, lambda path: Config({}), [0, 1, 2], tmp_path)  # nothing left to train
    rows = evidence.summarize(records, 'mIoU', ['a', 'b'])
    a, b = rows
    assert (a['n'], a['mean'], a['std']) == (3, 12, 2)
    assert a['ci_low'] == pytest.approx(12 - 4.968275, abs=1e-5) and a['ci_high'] == pytest.approx(16.968275, abs=1e-5)
    assert 'p' not in a
    assert b['mean'] == pytest.approx(14) and b['diff'] == pytest.approx(2)
    assert b['t'] == pytest.approx(3.464102, abs=1e-5) and b['p'] == pytest.approx(0.074180, abs=1e-5)
    assert b['p_holm'] == pytest.approx(b['p']) and b['differs'] == 'no'
    evidence.write(rows, records, tmp_path / 'out', 'header')
    evidence.plot(rows, records, 'mIoU', tmp_path / 'out', 'toy')
    table = (tmp_path / 'out' / 'results.md').read_text()
    assert '| a |' in table.replace('  ', ' ') or '| a ' in table
    saved = json.loads((tmp_path / 'out' / 'results.json').read_text())
    assert saved['summary'][1]['p'] == pytest.approx(0.074180, abs=1e-5) and len(saved['runs']) == 6
    assert (tmp_path / 'out' / 'toy.png').stat().st_size > 0


def test_holm_adjusts_over_the_fractions():
    # two fractions, p of each is computed from b - a; Holm: the smaller p doubled, the larger kept (monotone)
    records = [{'arm': arm, 'fraction': f, 'seed': s, 'mIoU': v}
               for f, a_vals, b_vals in ((0.5, (10, 12, 14), (11, 15, 16)), (1.0, (10, 12, 14), (12, 13, 17)))
               for arm, values in (('a', a_vals), ('b', b_vals)) for s, v in enumerate(values)]
    rows = evidence.summarize(records, 'mIoU', ['a', 'b'])
    tests = [r for r in rows if 'p' in r]
    low, high = sorted(tests, key=lambda r: r['p'])
    assert low['p_holm'] == pytest.approx(min(1.0, 2 * low['p'])) and high['p_holm'] == pytest.approx(
        max(high['p'], low['p_holm']))


def test_a_torchvision_classifier_trains_here_and_loads_back_as_a_teacher(tmp_path):
    import torch

    from heads.losses.distillation import build_teacher
    from heads.models.classifier import ImageClassifier
    model = ImageClassifier(backbone=dict(name='resnet18', source='torchvision'), num_classes=5).eval()
    assert all(key.startswith('classifier.') for key in model.state_dict())
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, tmp_path / 'iter_1.pth')  # as the Runner writes it
    teacher = build_teacher('resnet18', str(tmp_path / 'iter_1.pth'), num_classes=5, source='torchvision')
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(teacher(x), model(x))
    with pytest.raises(ValueError, match="backbone source must be 'zoo' or 'torchvision'"):
        ImageClassifier(backbone=dict(name='resnet18', source='hub'), num_classes=5)


def test_the_tool_names_every_claim():
    import runpy
    from pathlib import Path

    from lab.benchmark.evidence import CLAIMS
    tool = runpy.run_path(str(Path(__file__).parents[2] / 'tools' / 'evidence.py'))
    assert sorted(tool['CLAIM_NAMES']) == sorted(CLAIMS)
