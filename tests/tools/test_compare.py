"""tools/compare.py: the identity check between experiments, and one table row per backbone from real short runs."""
import csv
import importlib.util
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from lab.benchmark import compare

from .records import own_store, series_records

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location('compare_tool', ROOT / 'tools' / 'compare.py')
compare_tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_tool)


def experiment(name: str, lr: float, crop=(64, 64)) -> Config:
    return Config(dict(model=dict(backbone=dict(type='ZooBackbone', name=name)),
                       optim_wrapper=dict(optimizer=dict(type='AdamW', lr=lr)), crop_size=crop))


def test_identity_check_names_every_differing_key_outside_the_backbone():
    same = {'a': experiment('vit_tiny_patch16_224', 1e-3), 'b': experiment('cvt_13_224', 1e-3)}
    compare.check_only_backbones_differ(same)  # only model.backbone differs: accepted
    different = {'a': experiment('vit_tiny_patch16_224', 1e-3), 'b': experiment('cvt_13_224', 2e-3, (64, 96))}
    with pytest.raises(ValueError, match=r'b vs a: crop_size\.1, optim_wrapper\.optimizer\.lr'):
        compare.check_only_backbones_differ(different)


@pytest.mark.slow
def test_compare_writes_one_row_per_backbone_and_reuses_finished_runs(tmp_path, monkeypatch):
    """... each run trained is recorded (series compare) with the metrics of its row; a run read back is not."""
    folder = own_store(monkeypatch, tmp_path)
    specs = ['vit_tiny_patch16_224:{"depth": 4, "patch_size": 8, "img_size": (96, 128)}',
             'cvt_13_224:{"depths": (1, 1, 1), "out_indices": (0, 1, 2, 2)}']
    argv = ['configs/quickstart.py', '--backbones', *specs, '--out', str(tmp_path),
            '--cfg-options', 'train_cfg.max_iters=6', 'train_cfg.val_interval=6', 'default_hooks.logger.interval=2',
            'val_dataloader.dataset.num_samples=8']
    rows = compare_tool.main(argv)
    assert [r['backbone'] for r in rows] == ['vit_tiny_patch16_224', 'cvt_13_224']
    table = (tmp_path / 'compare.md').read_text().splitlines()
    assert len([line for line in table if line.startswith('| vit') or line.startswith('| cvt')]) == 2
    with open(tmp_path / 'compare.csv') as f:
        records = list(csv.DictReader(f))
    assert len(records) == 2 and all(float(r['mIoU']) >= 0 and float(r['GMACs']) > 0 for r in records)
    assert (tmp_path / 'compare.png').stat().st_size > 0
    logs = sorted(tmp_path.glob('*/*/vis_data/scalars.json'))
    recorded = series_records(folder, 'compare')
    options = {'train_cfg.max_iters': 6, 'train_cfg.val_interval': 6, 'default_hooks.logger.interval': 2,
               'val_dataloader.dataset.num_samples': 8}
    assert [r['settings'] for r in recorded] == [
        {'experiment': 'configs/quickstart.py', 'backbone': row['backbone'], 'cfg_options': options, 'iters': 6,
         'seed': row['seed']} for row in rows]
    for entry, row in zip(recorded, rows):
        assert entry['rounds'] == {} and entry['metrics']['wall_s'] > 0
        assert {k: entry['metrics'][k] for k in ('mIoU', 'aAcc', 'GMACs')} == {k: row[k] for k in ('mIoU', 'aAcc',
                                                                                                  'GMACs')}
    assert recorded[0]['command'].startswith('python tools/compare.py configs/quickstart.py --backbones')
    assert compare_tool.main(argv) == rows  # finished backbones are read back, not retrained
    assert len(series_records(folder, 'compare')) == 2  # and not recorded again
    assert sorted(tmp_path.glob('*/*/vis_data/scalars.json')) == logs


def test_rows_measured_on_a_busy_machine_are_flagged_and_explained(tmp_path):
    rows = [{'backbone': 'a', 'matmul_GFLOP_s': 100.0, 'train_img_s': 5.0, 'mIoU': 10.0},
            {'backbone': 'b', 'matmul_GFLOP_s': 74.0, 'train_img_s': None, 'mIoU': 11.0},
            {'backbone': 'c', 'matmul_GFLOP_s': 76.0, 'train_img_s': 4.0, 'mIoU': 12.0}]
    compare.write_table(rows, tmp_path, 'header')
    assert [r['busy'] for r in rows] == ['', 'yes: matmul at 74% of best', '']
    text = (tmp_path / 'compare.md').read_text()
    assert 'train_img_s is empty where the run timed fewer than two' in text and 'busy: the machine did' in text


def test_coinciding_points_share_one_label():
    points = [(1.0, 50.0, 'a'), (1.001, 50.0, 'b'), (2.0, 40.0, 'c')]
    assert compare.label_groups(points) == [(1.0, 50.0, 'a\nb'), (2.0, 40.0, 'c')]


def test_quick_mode_shrinks_the_schedule_and_the_validation_set():
    cfg = Config.fromfile(str(ROOT / 'configs' / 'quickstart.py'))
    compare.quick(cfg, 20, 16)
    assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval, cfg.default_hooks.checkpoint.interval) == (20, 20, 20)
    assert cfg.val_dataloader.dataset.indices == 16


def test_heads_may_differ_in_the_model_and_hooks_but_not_in_training_or_normalisation():
    dpt, uper = experiment('vit_tiny_patch16_224', 1e-3), experiment('vit_tiny_patch16_224', 1e-3)
    uper.model.decode_head = dict(type='UPerHead')
    uper.custom_hooks = [dict(type='SomeHook')]
    uper.optim_wrapper.paramwise_cfg = dict(custom_keys={'query': dict(decay_mult=0.0)})
    compare.check_only_backbones_differ({'dpt': dpt, 'uper': uper}, 'heads')
    with pytest.raises(ValueError, match=r'except model\.backbone; these keys differ:\n  '
                                         r'uper vs dpt: custom_hooks.0.type, model\.decode_head\.type, optim_wrapper'):
        compare.check_only_backbones_differ({'dpt': dpt, 'uper': uper})  # backbones mode: the head may not differ
    uper.model.data_preprocessor = dict(mean=[0, 0, 0])
    uper.optim_wrapper.optimizer.lr = 2e-3
    with pytest.raises(ValueError, match=r'uper vs dpt: model\.data_preprocessor.*optim_wrapper\.optimizer\.lr'):
        compare.check_only_backbones_differ({'dpt': dpt, 'uper': uper}, 'heads')


def test_the_heads_grid_trains_every_config_on_every_backbone():
    grid = compare.head_backbone_grid({'dpt': experiment('vit_tiny_patch16_224', 1e-3),
                                       'uper': experiment('vit_tiny_patch16_224', 1e-3)},
                                      ['deit_tiny_patch16_224', 'cvt_13_224'])
    assert list(grid) == ['dpt+deit_tiny_patch16_224', 'dpt+cvt_13_224', 'uper+deit_tiny_patch16_224',
                          'uper+cvt_13_224']
    assert grid['uper+cvt_13_224'].model.backbone.name == 'cvt_13_224'


def test_the_heads_flag_is_needed_for_a_grid():
    with pytest.raises(SystemExit):
        compare_tool.main(['--configs', 'a.py', 'b.py', '--backbones', 'vit_tiny_patch16_224'])


def test_the_training_measure_backpropagates_through_every_output_of_a_mask_head():
    from lab.benchmark.dense import output_scalar
    a, b = torch.ones(2, 3, requires_grad=True), torch.full((4,), 2.0, requires_grad=True)
    output_scalar((a, b)).backward()  # mean(a) + mean(b): each element's gradient is 1 / its tensor's size
    assert torch.equal(a.grad, torch.full((2, 3), 1 / 6)) and torch.equal(b.grad, torch.full((4,), 1 / 4))
    assert output_scalar(torch.full((2, 2), 3.0)) == 3.0


def test_configs_of_one_stem_get_distinct_names_from_their_folders(tmp_path):
    """--configs a/exp.py b/exp.py were keyed by stem: one 'exp', one run trained, one table row, exit 0."""
    assert compare.config_labels(['x/a.py', 'y/b.py']) == ['a', 'b']
    assert compare.config_labels(['a/exp.py', 'b/exp.py', 'c.py']) == ['a-exp', 'b-exp', 'c']
    assert compare.config_labels(['r/a/d/exp.py', 'r/b/d/exp.py']) == ['a-d-exp', 'b-d-exp']
    with pytest.raises(ValueError, match=r'a/exp\.py and a/\./exp\.py are the same file'):
        compare.config_labels(['a/exp.py', 'a/./exp.py'])
    (tmp_path / 'exp.py').write_text('')
    (tmp_path / 'link.py').symlink_to(tmp_path / 'exp.py')
    with pytest.raises(ValueError, match='are the same file'):
        compare.config_labels([str(tmp_path / 'exp.py'), str(tmp_path / 'link.py')])
    with pytest.raises(ValueError, match="share the name 'exp' and no folder of their paths tells them apart"):
        compare.config_labels(['a/exp.py', 'a/exp.json'])
    with pytest.raises(ValueError, match=r"a-exp\.py and b/a/exp\.py would both be run as 'a-exp'"):
        compare.config_labels(['a-exp.py', 'b/a/exp.py', 'c/b/exp.py'])


def test_a_config_given_twice_is_refused_before_anything_trains(tmp_path, capsys):
    (tmp_path / 'cfg').mkdir()
    config = toy_config(tmp_path / 'cfg' / 'exp.py')
    with pytest.raises(SystemExit) as exit_:
        compare_tool.main(['--configs', config, str(tmp_path / 'cfg' / '.' / 'exp.py'), '--out', str(tmp_path / 'out')])
    assert exit_.value.code == 2 and 'are the same file' in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()


def toy_config(path, mlp_ratio: float = 4.0) -> str:
    """configs/quickstart.py at a toy size: two iterations, four validation scenes."""
    path.write_text(f"_base_ = ['{ROOT / 'configs' / 'quickstart.py'}']\nsize = (32, 32)\n"
                    f"model = dict(backbone=dict(img_size=size, embed_dim=32, num_heads=2, mlp_ratio={mlp_ratio}), "
                    "neck=dict(hidden_channels=(8, 8, 8, 8), fusion_channels=8), decode_head=dict(in_channels=8))\n"
                    "train_dataloader = dict(batch_size=2, dataset=dict(num_samples=8, size=size))\n"
                    "val_dataloader = dict(batch_size=4, dataset=dict(num_samples=4, size=size))\n"
                    "train_cfg = dict(max_iters=2, val_interval=2)\n"
                    "default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))\n")
    return str(path)


@pytest.mark.slow
def test_configs_of_one_stem_in_two_folders_are_both_trained(tmp_path):
    paths = []
    for folder, ratio in (('a', 4.0), ('b', 2.0)):  # two models
        (tmp_path / folder).mkdir()
        paths.append(toy_config(tmp_path / folder / 'exp.py', ratio))
    rows = compare_tool.main(['--configs', *paths, '--out', str(tmp_path / 'out')])
    assert [r['backbone'] for r in rows] == ['a-exp', 'b-exp']
    assert sorted(p.name for p in (tmp_path / 'out').iterdir() if p.is_dir()) == ['a-exp', 'b-exp']
    assert rows[0]['params_M'] != rows[1]['params_M']  # two models, each trained in its own folder
