"""The depth recipes: the folder configs (metric and relative over RGBDFolderDataset, the folder given by
--data-root) check and train on a folder of real 7-Scenes frames; the mean-depth predictor (the bar) by hand and
on 7-Scenes, where the figures committed in docs/benchmarks/depth_recipes_intel_xeon.md must match a fresh
computation and the recipes' committed figures must clear it."""
import json
import re
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.structures import BaseDataElement, PixelData

from heads.datasets import RGBDDepthDataset, RGBDFolderDataset
from heads.evaluation import DepthMetric
from heads.evaluation.depth_baseline import mean_depth_baseline, training_mean_depth
from heads.registry import MODELS

from ..reference import shared_data

ROOT = Path(__file__).resolve().parents[2]
import check_dataset as check_tool  # noqa: E402
import depth_baseline as baseline_tool  # noqa: E402
import train as train_tool  # noqa: E402

BENCHMARK = ROOT / 'docs' / 'benchmarks' / 'depth_recipes_intel_xeon.md'
#: ViT-S/14 at test size (the family, the four taps and the neck and head types stay), 56x42 images
TINY = ['model.backbone.embed_dim=64', 'model.backbone.depth=4', 'model.backbone.num_heads=2',
        'model.backbone.out_indices=[0,1,2,3]', 'model.backbone.img_size=56',
        'model.neck.hidden_channels=[16,32,64,64]', 'model.neck.fusion_channels=32',
        'model.decode_head.in_channels=32', 'model.decode_head.hidden_channels=8',
        'train_dataloader.dataset.pipeline.2.scale=[56,42]', 'val_dataloader.dataset.pipeline.1.scale=[56,42]',
        'predict_scale=[56,42]', 'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False', 'val_dataloader.num_workers=0',
        'val_dataloader.persistent_workers=False', 'train_cfg.max_iters=2', 'train_cfg.val_interval=2',
        'default_hooks.checkpoint.interval=2', 'default_hooks.logger.interval=1']


def seven_scenes_folder(root: Path, train=('frame-000000', 'frame-000010', 'frame-000020'),
                        val=('frame-000300', 'frame-000310')) -> Path:
    """Real 7-Scenes frames in the folder layout, with train.txt and val.txt (the recipes' split files)."""
    source = shared_data('depth-7scenes')
    for sub in ('rgb', 'depth'):
        (root / sub).mkdir(parents=True)
    for stem in (*train, *val):
        shutil.copy(source / 'rgb' / f'{stem}.jpg', root / 'rgb')
        shutil.copy(source / 'depth' / f'{stem}.png', root / 'depth')
    (root / 'train.txt').write_text('\n'.join(train) + '\n')
    (root / 'val.txt').write_text('\n'.join(val) + '\n')
    return root


@pytest.mark.slow  # 8-40 s each on 2 busy cores
@pytest.mark.parametrize('config', ['depth_anything_v2_vits_folder.py', 'depth_anything_v2_vits_folder_relative.py'])
def test_the_folder_recipes_check_and_train_on_a_folder_given_on_the_command_line(config, tmp_path):
    folder = seven_scenes_folder(tmp_path / 'my_rgbd')
    assert check_tool.main([str(folder), '--depth-scale', '1000', '--depth-invalid', '0', '65535']) == 0
    train_tool.main([f'configs/{config}', '--work-dir', str(tmp_path / 'work'), '--data-root', str(folder),
                     '--cfg-options', *TINY])
    log = next((tmp_path / 'work').glob('*/vis_data/scalars.json')).read_text().splitlines()
    val = [json.loads(line) for line in log if 'abs_rel' in line]
    assert len(val) == 1 and np.isfinite(val[0]['abs_rel']) and 0 <= val[0]['d1'] <= 1
    trained = [json.loads(line) for line in log if 'loss_depth' in line]
    assert len(trained) == 2 and all(np.isfinite(t['loss_depth']) for t in trained)


def test_the_baseline_tool_records_what_it_prints(tmp_path, monkeypatch, capsys):
    """tools/depth_baseline.py on a 7-Scenes folder: one record (series depth_baseline) holding the printed line's
    metrics and training-mean depth, the config repository-relative."""
    from ..tools.records import own_store, series_records
    folder = own_store(monkeypatch, tmp_path)
    data = seven_scenes_folder(tmp_path / 'my_rgbd')
    out = baseline_tool.main([str(ROOT / 'configs' / 'depth_anything_v2_vits_folder.py'), '--data-root', str(data)])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == out
    (entry,) = series_records(folder, 'depth_baseline')
    assert entry['settings'] == {'config': 'configs/depth_anything_v2_vits_folder.py', 'cfg_options': {}}
    assert entry['rounds'] == {} and entry['metrics'] == {**printed['metrics'], 'train_frames': 3, 'val_frames': 2,
                                                          'train_mean_depth': printed['train_mean_depth']}


def test_the_folder_recipes_say_to_give_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no train.txt here
    with pytest.raises(FileNotFoundError, match=r'train\.txt does not exist.*data_root is empty.*--data-root DIR'):
        baseline_tool.main([str(ROOT / 'configs' / 'depth_anything_v2_vits_folder.py')])


def test_the_relative_recipe_fits_disparity_up_to_scale_and_shift_on_the_valid_pixels():
    """The relative recipe's model turns metric ground truth into 1/depth on its valid pixels (min_depth < depth <=
    max_depth) and scores the head's output after the least-squares scale and shift: with the gradient term off,
    sum over valid pixels of (s * pred + t - 1/depth)**2 / (2 * valid pixels), s and t from numpy's polyfit."""
    model_cfg = Config.fromfile(str(ROOT / 'configs' / 'depth_anything_v2_vits_7scenes_relative_cpu.py')).model
    model_cfg.backbone.update(embed_dim=64, depth=4, num_heads=2, out_indices=(0, 1, 2, 3), img_size=56)
    model_cfg.neck.update(hidden_channels=(16, 32, 64, 64), fusion_channels=32)
    model_cfg.decode_head.update(in_channels=32, hidden_channels=8)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg).eval()
    assert model.relative and type(model.loss_fn).__name__ == 'ScaleShiftInvariantLoss'
    model.loss_fn.alpha = 0.0
    depth = torch.rand(2, 56, 56) * 3 + 0.5
    depth[0, :5] = 0  # no measurement
    depth[1, -3:] = 12.0  # beyond max_depth = 10
    samples = [BaseDataElement(gt_depth=PixelData(data=d[None])) for d in depth]
    x = torch.randn(2, 3, 56, 56)
    with torch.no_grad():
        loss = model(x, samples, mode='loss')['loss_depth']
        pred = model.decode_head(model.extract_features(x)[-1])[:, 0].double().numpy()  # b h w, the label size
    g = depth.double().numpy()
    valid = (g > 1e-3) & (g <= 10.0)
    squares = 0.0
    for p, d, m in zip(pred, g, valid):
        s, t = np.polyfit(p[m], 1 / d[m], 1)
        squares += ((s * p[m] + t - 1 / d[m]) ** 2).sum()
    assert valid.sum() == 2 * 56 * 56 - 5 * 56 - 3 * 56
    assert loss.item() == pytest.approx(squares / (2 * valid.sum()), rel=1e-4)


def write_frame(root: Path, stem: str, depth_mm) -> None:
    depth_mm = np.asarray(depth_mm, np.uint16)
    cv2.imwrite(str(root / 'rgb' / f'{stem}.png'), np.zeros((*depth_mm.shape, 3), np.uint8))
    cv2.imwrite(str(root / 'depth' / f'{stem}.png'), depth_mm)


def test_the_mean_depth_predictor_by_hand(tmp_path):
    for sub in ('rgb', 'depth'):
        (tmp_path / sub).mkdir()
    write_frame(tmp_path, 'a', [[1000, 2000], [0, 3000]])        # 0: invalid
    write_frame(tmp_path, 'b', [[6000, 65535], [20000, 0]])      # 65535 invalid, 20 m beyond max_depth=10
    write_frame(tmp_path, 'v', [[1000, 4000], [0, 8000]])
    (tmp_path / 'train.txt').write_text('a\nb\n')
    (tmp_path / 'val.txt').write_text('v\n')
    make = lambda split: RGBDFolderDataset(str(tmp_path), list_file=f'{split}.txt',  # noqa: E731
                                           depth_invalid=(0, 65535))
    train, val = make('train'), make('val')
    assert training_mean_depth(train, DepthMetric()) == pytest.approx((1 + 2 + 3 + 6) / 4)  # 3 m
    mean, plain = mean_depth_baseline(train, val, DepthMetric())
    assert mean == pytest.approx(3.0)
    # 3 m against 1, 4, 8 m: |3-1|/1, |3-4|/4, |3-8|/8; ratios 3 and 8/3 beyond 1.25**3, 4/3 within 1.25**2 only
    assert plain['abs_rel'] == pytest.approx((2 + 1 / 4 + 5 / 8) / 3)
    assert plain['rmse'] == pytest.approx(np.sqrt((4 + 1 + 25) / 3))
    assert plain['d1'] == 0 and plain['d2'] == plain['d3'] == pytest.approx(1 / 3)
    # aligned in disparity a constant gets s = 0, t = mean(1/g): the harmonic mean 1 / ((1 + 1/4 + 1/8) / 3)
    _, aligned = mean_depth_baseline(train, val, DepthMetric(alignment='scale_shift_disparity'))
    h = 3 / (1 + 1 / 4 + 1 / 8)
    assert aligned['abs_rel'] == pytest.approx((abs(h - 1) + abs(h - 4) / 4 + abs(h - 8) / 8) / 3)
    _, median = mean_depth_baseline(train, val, DepthMetric(alignment='median'))
    assert median['abs_rel'] == pytest.approx((3 + 0 + 4 / 8) / 3)  # each image's median, 4 m


def committed_rows() -> dict:
    """{name: {metric: value}} of the benchmark file's results table, rows '| name | AbsRel | d1 | RMSE | SiLog |'."""
    rows = {}
    for line in BENCHMARK.read_text().splitlines():
        cells = [c.strip().strip('`') for c in line.strip().strip('|').split('|')]
        if len(cells) == 5 and re.fullmatch(r'[0-9.]+', cells[1]):
            rows[cells[0]] = dict(zip(('abs_rel', 'd1', 'rmse', 'silog'), map(float, cells[1:])))
    return rows


@pytest.mark.slow
def test_the_committed_7_scenes_bars_are_the_mean_depth_predictors_and_the_recipes_clear_them():
    """About 10 s: the 390 7-Scenes depth maps read twice."""
    root = str(shared_data('depth-7scenes'))
    train, val = RGBDDepthDataset(root, 'train.txt'), RGBDDepthDataset(root, 'val.txt')
    rows = committed_rows()
    for bar, recipe, alignment in (('mean depth', 'metric recipe', None),
                                   ('mean depth, aligned', 'relative recipe', 'scale_shift_disparity')):
        _, fresh = mean_depth_baseline(train, val, DepthMetric(alignment=alignment))
        assert rows[bar] == pytest.approx({k: fresh[k] for k in rows[bar]}, abs=6e-4), bar
        for name in ('abs_rel', 'rmse', 'silog'):
            assert rows[recipe][name] < rows[bar][name], (recipe, name)
        assert rows[recipe]['d1'] > rows[bar]['d1'], recipe
