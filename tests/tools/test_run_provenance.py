"""Issue 36: tools/compare.py and tools/evidence.py read a result back only for the settings that produced it
(resolved config digest, iterations, seed, options), never average runs of different settings, and name and redo a
run whose result.json or scalars.json is damaged. Real short runs of a toy DPT (1-2 iterations)."""
import json
import warnings
from pathlib import Path

import pytest
from mmengine.config import Config

from lab.benchmark import compare, evidence, runs
from lab.benchmark.provenance import ProvenanceError

from .test_compare import compare_tool
from .test_evidence import tiny

BACKBONE = 'vit_tiny_patch16_224:{"depth": 4, "patch_size": 8, "img_size": (32, 32), "embed_dim": 32, ' \
           '"num_heads": 2}'


def compare_argv(config: str, out: Path, *options: str) -> list[str]:
    return [config, '--backbones', BACKBONE, '--out', str(out), '--seeds', '2', '--cfg-options', *options]


def logs(folder: Path) -> list[Path]:
    """The mmengine logs of the runs under ``folder`` (not those moved aside)."""
    return sorted(p for p in folder.rglob('vis_data/scalars.json') if not any(d.startswith('superseded-')
                                                                              for d in p.parts))


@pytest.mark.slow
def test_compare_seeds_never_average_runs_of_other_iterations(tmp_path):
    config, out = tiny(tmp_path), tmp_path / 'out'
    first = compare_tool.main(compare_argv(config, out, 'train_cfg.max_iters=1'))[0]
    assert first['iters'] == 1
    with pytest.warns(UserWarning) as caught:
        second = compare_tool.main(compare_argv(config, out, 'train_cfg.max_iters=2'))[0]
    results = {seed: json.loads((out / 'vit_tiny_patch16_224' / f'seed{seed}' / 'result.json').read_text())
               for seed in (0, 1)}
    # both seeds were trained again for 2 iterations: the mean is over the new runs only
    assert [results[s]['iters'] for s in (0, 1)] == [2, 2] and second['iters'] == 2
    assert [results[s]['provenance']['iters'] for s in (0, 1)] == [2, 2]
    assert second['mIoU'] == pytest.approx((results[0]['mIoU'] + results[1]['mIoU']) / 2)
    said = [str(w.message) for w in caught if 'other settings' in str(w.message)]
    assert len(said) == 2 and all('result.json was made with other settings: iters 1, now 2' in m for m in said)
    assert 'config keys train_cfg.max_iters' in said[0]
    # the 1-iteration runs are kept, moved aside
    aside = json.loads((out / 'vit_tiny_patch16_224' / 'seed0' / 'superseded-1' / 'result.json').read_text())
    assert aside['iters'] == 1
    # the same settings again: nothing is trained
    trained = logs(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert compare_tool.main(compare_argv(config, out, 'train_cfg.max_iters=2'))[0] == second
    assert logs(out) == trained and not [w for w in caught if 'again from the start' in str(w.message)]


def test_runs_of_different_settings_never_share_a_mean():
    made = {'config_digest': 'a' * 64, 'options': {'measure_costs': True}}
    two = {'backbone': 'vit', 'seed': 0, 'iters': 2, 'mIoU': 10.0, 'provenance': {**made, 'iters': 2, 'seed': 0}}
    four = {'backbone': 'vit', 'seed': 1, 'iters': 4, 'mIoU': 40.0,
            'provenance': {**made, 'options': {'measure_costs': False}, 'iters': 4, 'seed': 1}}
    with pytest.raises(ProvenanceError, match=r'OUT/vit/seed1/result.json vs OUT/vit/seed0/result.json: iters 4, '
                                              r'now 2'):
        compare.summarize_seeds([two, four], ['OUT/vit/seed0/result.json', 'OUT/vit/seed1/result.json'])
    same = {**four, 'iters': 2, 'provenance': {**four['provenance'], 'iters': 2}}
    assert compare.summarize_seeds([two, same])['mIoU'] == 25.0  # the seed and whether costs were measured aside
    with pytest.raises(ProvenanceError, match=r'seeds \[0, 0\] repeat'):
        compare.summarize_seeds([two, two])


def claim_runs(claim, load, work: Path, **options) -> list[str]:
    """The runs :func:`evidence.execute` trained (by their new logs)."""
    before = set(logs(work))
    evidence.execute(claim, load, [0], work, **options)
    return sorted(str(p.relative_to(work).parents[2]) for p in set(logs(work)) - before)


@pytest.mark.slow
def test_evidence_reruns_what_other_options_made_and_keeps_the_rest(tmp_path):
    config = tiny(tmp_path)
    claim = evidence.Claim('toy', 'mIoU', {'a': config, 'b': config}, prerequisite=config, needs={'b': 'load_from'})
    work = tmp_path / 'work'
    load = lambda path: constant_lr(path, 1e-3)  # noqa: E731
    assert claim_runs(claim, load, work) == ['a/seed0', 'b/seed0', 'prerequisite/seed0']
    # --iters changes the arms only: the prerequisite is kept
    with pytest.warns(UserWarning, match=r'a/seed0/result.json was made with other settings: iters 2, now 1'):
        assert claim_runs(claim, load, work, iters=1) == ['a/seed0', 'b/seed0']
    # --cfg-options change every run; b, which starts from the prerequisite, records the prerequisite's settings
    faster = lambda path: constant_lr(path, 2e-3)  # noqa: E731
    with pytest.warns(UserWarning, match=r'config keys optim_wrapper.optimizer.lr'):
        assert claim_runs(claim, faster, work, iters=1) == ['a/seed0', 'b/seed0', 'prerequisite/seed0']
    b = runs.read_result(work / 'b' / 'seed0' / 'result.json')
    prerequisite = runs.read_result(work / 'prerequisite' / 'seed0' / 'result.json')
    assert b['provenance']['options']['prerequisite']['config_digest'] == prerequisite['provenance']['config_digest']
    assert claim_runs(claim, faster, work, iters=1) == []


def constant_lr(path: str, lr: float) -> Config:
    """The config at ``path`` trained at the constant rate ``lr`` (quickstart's warm-up of 50 iterations does not
    fit in --iters 1)."""
    cfg = Config.fromfile(path)
    cfg.merge_from_dict({'optim_wrapper.optimizer.lr': lr, 'param_scheduler': None})
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize('damage', ['truncated', 'empty'])
def test_a_damaged_result_or_log_is_named_and_its_run_redone(tmp_path, damage):
    config = tiny(tmp_path)
    claim = evidence.Claim('toy', 'mIoU', {'a': config})
    work, load = tmp_path / 'work', (lambda path: Config.fromfile(path))
    run = work / 'a' / 'seed0'
    assert claim_runs(claim, load, work) == ['a/seed0']
    result = run / 'result.json'
    result.write_text(result.read_text()[:40] if damage == 'truncated' else '')
    with pytest.warns(UserWarning, match=rf'{result} is damaged: not JSON'):
        assert claim_runs(claim, load, work) == ['a/seed0']
    assert runs.read_result(result)['mIoU'] is not None
    assert (run / 'superseded-1' / 'result.json').stat().st_size == (40 if damage == 'truncated' else 0)

    # an interrupted run (no result.json) whose log was cut short: resumed, then its log is named and it is redone
    result.unlink()
    log = next(run.glob('*/vis_data/scalars.json'))
    log.write_text(log.read_text()[:-10] if damage == 'truncated' else '')
    with pytest.warns(UserWarning, match=rf'{log} is damaged'):
        assert claim_runs(claim, load, work) == ['a/seed0']
    assert runs.read_result(result)['mIoU'] is not None
    assert (run / 'superseded-2' / log.relative_to(run)).exists()


def test_a_budget_derived_for_another_budget_or_config_is_derived_anew(tmp_path):
    cfg = Config.fromfile(tiny(tmp_path))
    one, _ = compare.budgeted('vit', cfg, tmp_path, ('flops', 1.0))
    assert compare.budgeted('vit', cfg, tmp_path, ('flops', 1.0))[0].train_cfg.max_iters == one.train_cfg.max_iters
    with pytest.warns(UserWarning, match=r'budget.json: it was derived for another budget or config'):
        two, _ = compare.budgeted('vit', cfg, tmp_path, ('flops', 2.0))
    assert two.train_cfg.max_iters == pytest.approx(2 * one.train_cfg.max_iters, abs=1)
    cfg.train_dataloader.batch_size = 4  # --cfg-options: twice the images per iteration
    with pytest.warns(UserWarning, match=r'budget.json: it was derived for another budget or config'):
        half, _ = compare.budgeted('vit', cfg, tmp_path, ('flops', 2.0))
    assert half.train_cfg.max_iters == pytest.approx(one.train_cfg.max_iters, abs=1)
