"""Repeated runs in tools/compare.py: the interval and significance arithmetic against hand-worked numbers and scipy,
budgets against their formulas, and --seeds rerunning only the runs an interruption left unfinished."""
import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from scipy import stats as scipy_stats

from heads.registry import MODELS
from lab.benchmark import budget, stats
from zoo.profiling import count_macs

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location('compare_tool', ROOT / 'tools' / 'compare.py')
compare_tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_tool)


def test_interval_of_three_runs_by_hand():
    # mean 72, s = sqrt(((-2)^2 + 0 + 2^2) / 2) = 2, t(0.975, 2) = 4.302653, half-width 4.302653 * 2 / sqrt(3) = 4.9683
    summary = stats.summarize([70.0, 72.0, 74.0])
    assert summary['n'] == 3 and summary['mean'] == 72.0 and summary['std'] == pytest.approx(2.0)
    assert summary['ci_low'] == pytest.approx(72.0 - 4.96827, abs=1e-4)
    assert summary['ci_high'] == pytest.approx(72.0 + 4.96827, abs=1e-4)
    one = stats.summarize([70.0])
    assert one['std'] is None and one['ci_low'] is None


@pytest.mark.parametrize('df', [1, 2, 3, 5, 10, 30, 200])
def test_student_t_matches_scipy(df):
    for t in (-6.0, -2.5, -0.3, 0.0, 0.7, 1.96, 4.0, 25.0):
        assert stats.t_sf(t, df) == pytest.approx(scipy_stats.t.sf(t, df), abs=1e-10, rel=1e-7)
    for p in (0.6, 0.9, 0.975, 0.995):
        assert stats.t_quantile(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), rel=1e-7)
    # printed tables: t(0.975, 2) = 4.303, t(0.975, 10) = 2.228, t(0.975, 30) = 2.042
    assert {2: 4.303, 10: 2.228, 30: 2.042}.get(df, round(stats.t_quantile(0.975, df), 3)) == \
        round(stats.t_quantile(0.975, df), 3)


def test_paired_test_by_hand():
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.4641 with 2 degrees of freedom
    result = stats.paired_t_test([70.0, 72.0, 74.0], [69.0, 70.0, 71.0])
    assert result['mean_diff'] == 2.0 and result['df'] == 2
    assert result['t'] == pytest.approx(2 * math.sqrt(3))
    assert result['p'] == pytest.approx(scipy_stats.ttest_rel([70, 72, 74], [69, 70, 71]).pvalue, rel=1e-9)
    assert result['p'] == pytest.approx(0.0742, abs=1e-4)
    assert stats.paired_t_test([1.0, 2.0], [1.0, 2.0])['p'] == 1.0  # no difference at all
    assert stats.paired_t_test([2.0, 3.0], [1.0, 2.0])['p'] == 0.0  # the same difference every time
    with pytest.raises(ValueError, match='at least 2 runs'):
        stats.paired_t_test([1.0], [2.0])


def test_holm_adjustment_by_hand():
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04 -> made non-decreasing: 0.03, 0.06, 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_pairs_are_matched_by_seed_and_only_real_differences_pass():
    runs = {'a': {0: 70.0, 1: 72.0, 2: 74.0}, 'b': {2: 71.0, 0: 69.0, 1: 70.0}, 'c': {0: 70.5, 1: 71.0}}
    pairs = {(p['a'], p['b']): p for p in stats.pairwise_differences(runs)}
    assert pairs[('a', 'b')]['mean_diff'] == pytest.approx(2.0) and pairs[('a', 'b')]['n'] == 3
    assert pairs[('a', 'c')]['n'] == 2  # seed 2 of a has no partner in c
    assert not any(p['differs'] for p in pairs.values())  # three seeds, three pairs: nothing clears Holm at 0.05
    clear = stats.pairwise_differences({'a': {s: 80.0 + s * 0.01 for s in range(5)},
                                        'b': {s: 70.0 + s * 0.02 for s in range(5)}})
    assert clear[0]['differs']


def test_budgets_follow_their_formulas():
    cfg = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))
    crop = (64, 96)
    macs = count_macs(MODELS.build(cfg.model).eval(), torch.randn(1, 3, *crop))
    per_iter = 6 * macs * cfg.train_dataloader.batch_size
    derived = budget.budget_iterations(cfg, crop, budget.parse_budget('flops:0.5'))
    assert derived['iters'] == round(0.5e12 / per_iter)
    assert derived['train_TFLOP_per_iter'] == pytest.approx(per_iter / 1e12)
    assert budget.budget_iterations(cfg, crop, budget.parse_budget('iters:7')) == {'iters': 7}
    assert budget.budget_iterations(cfg, crop, budget.parse_budget('iters')) == {'iters': cfg.train_cfg.max_iters}
    for bad, message in [('flop:3', 'unknown budget'), ('time:0', 'positive amount'), ('iters:2.5', 'whole number'),
                         ('iters:0', 'whole number')]:
        with pytest.raises(ValueError, match=message):
            budget.parse_budget(bad)


def test_a_shorter_budget_rescales_the_schedule():
    cfg = Config(dict(train_cfg=dict(max_iters=1000, val_interval=500),
                      default_hooks=dict(checkpoint=dict(interval=500)),
                      param_scheduler=[dict(type='LinearLR', by_epoch=False, begin=0, end=50),
                                       dict(type='PolyLR', by_epoch=False, begin=50, end=1000)]))
    budget.set_iterations(cfg, 300)
    assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval, cfg.default_hooks.checkpoint.interval) == \
        (300, 300, 300)
    assert [s['end'] for s in cfg.param_scheduler] == [50, 300]  # warm-up kept, decay ends at the new end


def test_a_budget_shorter_than_the_warm_up_keeps_a_schedule_mmengine_can_build():
    """A 20-iteration run of a schedule with a 50-iteration warm-up: the decay would begin after the run ends
    (mmengine refused it: 'end should be larger than begin, but got begin=50, end=20')."""
    from mmengine.optim.scheduler import LinearLR, PolyLR
    cfg = Config(dict(train_cfg=dict(max_iters=1000),
                      param_scheduler=[dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
                                       dict(type='PolyLR', by_epoch=False, begin=50, end=1000)]))
    budget.set_iterations(cfg, 20)
    assert [(s['type'], s['begin'], s['end']) for s in cfg.param_scheduler] == [('LinearLR', 0, 20)]
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    for scheduler in cfg.param_scheduler:
        kind = {'LinearLR': LinearLR, 'PolyLR': PolyLR}[scheduler['type']]
        kind(optimizer, **{k: v for k, v in scheduler.items() if k != 'type'})


@pytest.mark.slow
def test_seeds_give_intervals_and_pairs_and_rerun_only_missing_runs(tmp_path):
    specs = ['vit_tiny_patch16_224:{"depth": 4, "patch_size": 8, "img_size": (96, 128)}',
             'cvt_13_224:{"depths": (1, 1, 1), "out_indices": (0, 1, 2, 2)}']
    argv = ['configs/quickstart.py', '--backbones', *specs, '--out', str(tmp_path), '--seeds', '2',
            '--cfg-options', 'train_cfg.max_iters=3', 'train_cfg.val_interval=3', 'default_hooks.logger.interval=1',
            'val_dataloader.dataset.num_samples=4']
    rows = compare_tool.main(argv)
    results = sorted(tmp_path.glob('*/seed*/result.json'))
    assert [p.relative_to(tmp_path).as_posix() for p in results] == [
        'cvt_13_224/seed0/result.json', 'cvt_13_224/seed1/result.json',
        'vit_tiny_patch16_224/seed0/result.json', 'vit_tiny_patch16_224/seed1/result.json']
    per_seed = {json.loads(p.read_text())['seed']: json.loads(p.read_text())['mIoU']
                for p in results if p.parts[-3] == 'vit_tiny_patch16_224'}
    assert rows[0]['seeds'] == 2 and rows[0]['mIoU'] == pytest.approx((per_seed[0] + per_seed[1]) / 2)
    assert rows[0]['mIoU_std'] == pytest.approx(abs(per_seed[0] - per_seed[1]) / math.sqrt(2))
    text = (tmp_path / 'compare.md').read_text()
    assert 'mIoU_ci95' in text and 'paired t-test over seeds' in text
    assert '| vit_tiny_patch16_224 | cvt_13_224 |' in text

    # an interruption: one run never finished (no result.json); the rerun trains it alone
    unfinished = tmp_path / 'cvt_13_224' / 'seed1'
    (unfinished / 'result.json').unlink()
    finished = {p: p.stat().st_mtime_ns for p in tmp_path.glob('*/seed*/*/vis_data/scalars.json')
                if unfinished not in p.parents}
    assert compare_tool.main(argv)[0] == rows[0]
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    assert (unfinished / 'result.json').exists()


def test_macs_are_counted_for_a_model_that_views_a_parameter():
    """Mask2Former's decoder expands its learned queries (a view of a parameter); the count must not refuse it."""
    from zoo.profiling import count_macs

    class Queries(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.query = torch.nn.Parameter(torch.randn(5, 8))
            self.norm, self.fc = torch.nn.LayerNorm(8), torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(self.norm(self.query.expand(x.shape[0], -1, -1)))

    model = Queries()
    with torch.no_grad():
        assert count_macs(model, torch.randn(2, 3)) == 2 * 5 * 8 * 4
    assert all(p.requires_grad for p in model.parameters())
