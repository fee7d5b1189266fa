"""The picture tools draw from the real model: attention maps equal softmax(q k^T) of the layer, rollout follows
its formula, prediction overlays keep the image's size, the depth colours are monotone in depth, the log and
dataset pictures show what was logged and what the pipeline packs."""
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from einops import rearrange

import zoo
from heads.models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
from heads.visualization.draw import colorize_depth
from zoo.attention_maps import AttentionMap, record_attention, rollout
from zoo.core import Attention

ROOT = Path(__file__).resolve().parents[2]
import browse_dataset  # noqa: E402
import infer  # noqa: E402
import plot_logs  # noqa: E402
import train as train_tool  # noqa: E402
import visualize_attention  # noqa: E402

from ..reference import sample_street  # noqa: E402

SMALL = {'vit': ('vit_tiny_patch16_224', dict(depth=4)),
         'deit': ('deit_tiny_distilled_patch16_224', dict(depth=4)),
         'cvt': ('cvt_13_224', dict(depths=[1, 1, 1])),
         'coatnet': ('coatnet_0_rw_224', dict(depths=[1, 1, 2, 1])),
         'crossvit': ('crossvit_tiny_240', dict(depths=[[1, 2, 0], [1, 1, 0]], out_indices=[0, 0, 1, 1]))}


def small_backbone(family):
    torch.manual_seed(0)
    name, overrides = SMALL[family]
    return zoo.create_backbone(name, **overrides).eval()


def recomputed_weights(attention: Attention, tokens: torch.Tensor, grid) -> torch.Tensor:
    """softmax(q k^T * scale + position bias) from the layer's own q/k projection: 'b heads m n'."""
    q, k, _ = attention.qkv(tokens, grid=grid)
    q, k = (rearrange(t, 'b n (h d) -> b h n d', h=attention.num_heads) for t in (q, k))
    scores = q @ k.transpose(-2, -1) * attention.scale
    if attention.pos_bias is not None:
        scores = scores + attention.pos_bias(grid)[None]
    return scores.softmax(-1)


@pytest.mark.parametrize('family', ['vit', 'deit', 'cvt', 'coatnet', 'crossvit'])
def test_recorded_maps_equal_softmax_of_q_and_k_of_each_layer(family):
    backbone = small_backbone(family)
    inputs = {}

    def keep_input(module, args, kwargs):  # the tokens and grid each layer was called with
        inputs[module] = (args[0], kwargs.get('grid'))
    hooks = [m.register_forward_pre_hook(keep_input, with_kwargs=True)
             for m in backbone.modules() if isinstance(m, Attention)]
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        plain = backbone(x)
        inputs.clear()
        with record_attention(backbone, (64, 96)) as maps:
            recorded = backbone(x)
    for hook in hooks:
        hook.remove()
    for a, b in zip(plain, recorded):  # recording changes nothing but the path the weights come from
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    modules = dict(backbone.named_modules())
    self_attention = [m for m in maps if m.is_self_attention]
    assert len(self_attention) == sum(isinstance(m, Attention) for m in backbone.modules()) - (
        2 * len(backbone.blocks) if family == 'crossvit' else 0)  # CrossViT: 2 cross-attentions per block
    for attention_map in maps:
        module = modules[attention_map.name]
        tokens, grid = inputs[module]
        if not attention_map.is_self_attention:
            continue
        expected = recomputed_weights(module, tokens, grid)
        torch.testing.assert_close(attention_map.weights, expected, rtol=1e-4, atol=1e-6)
        prefix = attention_map.num_prefix
        kh, kw = attention_map.key_grid
        assert prefix + kh * kw == expected.shape[-1]
        row = attention_map.from_query(0)  # what the tool draws for the first query
        torch.testing.assert_close(row, rearrange(expected[:, :, 0, prefix:], 'b h (y x) -> b h y x', y=kh))


def test_rollout_of_an_identity_attention_model_is_the_identity():
    """Attention restricted to each token itself (a diagonal mask): every layer is the identity, so is rollout."""
    layer = Attention(16, num_heads=2).eval()
    tokens, eye = torch.randn(2, 5, 16), torch.eye(5, dtype=torch.bool)
    with torch.no_grad(), record_attention(layer, (2, 2)) as maps:
        for _ in range(3):
            layer(tokens, grid=(2, 2), mask=eye)
    assert len(maps) == 3 and maps[0].num_prefix == 1
    torch.testing.assert_close(rollout(maps), torch.eye(5).expand(2, 5, 5))


def test_rollout_is_the_product_of_residual_mixed_layers():
    torch.manual_seed(0)
    weights = [torch.randn(1, 3, 5, 5).softmax(-1) for _ in range(3)]
    maps = [AttentionMap(f'l{i}', w, 1, (2, 2), (2, 2)) for i, w in enumerate(weights)]
    expected = torch.eye(5)
    for w in weights:  # Abnar & Zuidema: A' = 0.5 mean_heads(A) + 0.5 I, rows renormalised, later layers on the left
        mixed = 0.5 * w[0].mean(0) + 0.5 * torch.eye(5)
        expected = (mixed / mixed.sum(-1, keepdim=True)) @ expected
    torch.testing.assert_close(rollout(maps)[0], expected)
    with pytest.raises(ValueError, match='self-attention over one token set'):
        rollout([maps[0], AttentionMap('cvt', torch.rand(1, 3, 5, 2), 1, (1, 1), (2, 2))])


@pytest.fixture(scope='module')
def street():
    return sample_street()


@pytest.mark.parametrize('family', ['vit', 'deit', 'cvt', 'coatnet', 'crossvit'])
def test_attention_tool_draws_every_family(family, street, tmp_path, monkeypatch, capsys):
    name, overrides = SMALL[family]
    monkeypatch.setattr(visualize_attention, 'load_backbone',
                        lambda source, checkpoint: (small_backbone(family), IMAGENET_MEAN_255, IMAGENET_STD_255))
    picture = visualize_attention.main([name, str(street), '--size', '64', '--panel', '48', '--head', 'all',
                                        '--out', str(tmp_path / 'a.png')])
    assert (tmp_path / 'a.png').is_file() and picture.ndim == 3
    assert cv2.imread(str(tmp_path / 'a.png')).shape == picture.shape
    # no --checkpoint: random weights, said on the console and in a title strip above the rest of the picture
    assert 'RANDOM weights' in capsys.readouterr().err
    from heads.visualization.draw import caption
    strip = caption(np.zeros((0, picture.shape[1], 3), np.uint8), visualize_attention.RANDOM_WEIGHTS, height=22)
    assert np.array_equal(picture[:22], strip)


@pytest.mark.slow
def test_attention_tool_reads_a_trained_config_checkpoint(trained_quickstart, tmp_path):
    config, checkpoint, image = trained_quickstart
    picture = visualize_attention.main([config, str(image), '--checkpoint', str(checkpoint), '--size', '96',
                                        '--query', '0.5,0.5', '--out', str(tmp_path / 'a.png')])
    assert picture.shape[0] > 96


def test_depth_colours_are_monotone_in_depth():
    """Deeper is darker along the colour map: each colour's position in cv2's magma table falls with depth."""
    table = cv2.cvtColor(cv2.applyColorMap(np.arange(256, dtype=np.uint8)[:, None], cv2.COLORMAP_MAGMA),
                         cv2.COLOR_BGR2RGB)[:, 0].astype(int)
    depth = np.linspace(0.5, 4.0, 200, dtype=np.float32)[None]
    colours = colorize_depth(depth)[0].astype(int)
    position = np.argmin(((colours[:, None] - table[None]) ** 2).sum(-1), axis=1)
    assert (np.diff(position) <= 0).all() and position[0] == 255 and position[-1] == 0


@pytest.fixture(scope='module')
def trained_quickstart(tmp_path_factory):
    """The quickstart trained 4 iterations (validated at 2 and 4), and one of its images as a file."""
    work_dir = tmp_path_factory.mktemp('quickstart')
    args = ['configs/quickstart.py', '--work-dir', str(work_dir), '--cfg-options', 'train_cfg.max_iters=4',
            'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=4', 'default_hooks.logger.interval=1',
            'train_dataloader.batch_size=2', 'train_dataloader.dataset.num_samples=8',
            'val_dataloader.dataset.num_samples=2']
    old = Path.cwd()
    try:
        import os
        os.chdir(ROOT)
        train_tool.main(args)
    finally:
        os.chdir(old)
    from heads.datasets import SyntheticScenes
    image = SyntheticScenes(num_samples=1, size=(90, 120), seed=3).get_data_info(0)['img']
    cv2.imwrite(str(work_dir / 'scene.png'), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return str(ROOT / 'configs' / 'quickstart.py'), work_dir / 'iter_4.pth', work_dir / 'scene.png'


def test_infer_overlays_have_the_image_size_and_a_legend(trained_quickstart, tmp_path):
    config, checkpoint, image = trained_quickstart
    (tmp_path / 'in').mkdir()
    (tmp_path / 'in' / 'scene.png').write_bytes(image.read_bytes())
    written = infer.main([config, str(checkpoint), str(tmp_path / 'in'), '--out', str(tmp_path / 'out')])
    assert written == [tmp_path / 'out' / 'scene.png']
    picture, raw = cv2.imread(str(written[0])), cv2.imread(str(tmp_path / 'out' / 'scene_pred.png'),
                                                           cv2.IMREAD_UNCHANGED)
    assert raw.shape == (90, 120) and raw.dtype == np.uint8 and raw.max() < 4  # class ids of the 4 classes
    assert picture.shape[0] == 90 and picture.shape[1] > 120  # the overlay at the image's size, then the legend
    original = cv2.imread(str(image))
    unlabelled = raw == 255
    assert np.array_equal(picture[:, :120][unlabelled], original[unlabelled])


def test_infer_depth_picture_and_missing_input(tmp_path):
    depth = np.tile(np.linspace(1.0, 3.0, 40, dtype=np.float32), (30, 1))
    image = np.full((30, 40, 3), 7, np.uint8)
    picture = infer.draw_depth(image, depth)
    assert picture.shape[:2] == (30, 40 + 40 + 70)  # image | depth at the image's size | colour bar
    assert (picture[:, :40] == image).all() and (picture[:, 40:80] == colorize_depth(depth)).all()
    with pytest.raises(FileNotFoundError, match='nowhere.jpg'):
        infer.list_images([tmp_path / 'nowhere.jpg'])
    with pytest.raises(ValueError, match='holds no image'):
        infer.list_images([tmp_path])


def test_plot_logs_shows_what_mmengine_logged(trained_quickstart, tmp_path):
    _, checkpoint, _ = trained_quickstart
    work_dir = checkpoint.parent
    runs = plot_logs.main([str(work_dir), '--out', str(tmp_path / 'curves.png')])
    records = [json.loads(line) for line in next(work_dir.glob('*/vis_data/scalars.json')).read_text().splitlines()]
    scalars = runs[work_dir.name]
    assert scalars['train']['loss'] == {r['step']: r['loss'] for r in records if 'loss' in r}
    assert scalars['train']['lr'] == {r['step']: r['lr'] for r in records if 'lr' in r}
    assert scalars['val']['mIoU'] == {r['step']: r['mIoU'] for r in records if 'mIoU' in r} and \
        sorted(scalars['val']['mIoU']) == [2, 4]
    assert cv2.imread(str(tmp_path / 'curves.png')).shape[1] > 1000
    # the validation pictures went to the visualizer's backends too (TensorBoard's images tab; here the local one)
    assert len(list(work_dir.glob('*/vis_data/vis_image/val_predictions_*.png'))) == 2


@pytest.mark.slow
def test_browse_dataset_draws_what_the_pipeline_packs(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    picture = browse_dataset.main(['configs/quickstart.py', '--split', 'val', '--num', '2',
                                   '--out', str(tmp_path / 'b.png')])
    from heads.datasets import SyntheticScenes
    from heads.engine.launch import load_config
    cfg = load_config('configs/quickstart.py')
    from heads.registry import DATASETS
    dataset = DATASETS.build(cfg.val_dataloader.dataset)
    assert isinstance(dataset, SyntheticScenes)
    first = dataset[0]['inputs'].numpy().transpose(1, 2, 0)
    h, w = first.shape[:2]
    assert np.array_equal(picture[18:18 + h, :w], first)  # below its caption strip
    assert picture.shape[0] >= 2 * (18 + h)


def test_attention_tool_names_a_head_that_does_not_exist():
    backbone = small_backbone('vit')  # ViT-Ti: 3 heads
    maps = visualize_attention.attention_maps(backbone, np.zeros((32, 32, 3), np.uint8),
                                              IMAGENET_MEAN_255, IMAGENET_STD_255)
    with pytest.raises(ValueError, match=r"blocks\.0\.attn has 3 heads: --head must be 'mean', 'all' or 0\.\.2"):
        visualize_attention.head_rows(maps, list(range(len(maps))), '5', None, columns=6)
    assert len(visualize_attention.head_rows(maps, [0, 1, 2, 3], '2', 'cls', columns=3)) == 2  # 4 panels, 3 a row


def test_plot_logs_draws_a_loss_term_equal_to_the_total_once_and_keeps_metrics_in_their_range(tmp_path):
    from heads.engine.console.logs import metric_bounds
    same = {'loss': {1: 2.0, 2: 1.0}, 'loss_ce': {1: 2.0, 2: 1.0}, 'lr': {1: 0.1, 2: 0.1}}
    assert plot_logs.loss_terms(same) == {'loss': ['loss', 'loss_ce']}
    two = {'loss': {1: 3.0, 2: 2.0}, 'loss_ce': {1: 2.0, 2: 1.0}, 'loss_aux': {1: 1.0, 2: 1.0}}
    assert plot_logs.loss_terms(two) == {'loss': ['loss'], 'loss_aux': ['loss_aux'], 'loss_ce': ['loss_ce']}
    assert metric_bounds('mIoU') == metric_bounds('top1') == (0, 100) and metric_bounds('d1') == (0, 1)
    assert metric_bounds('coco/bbox_mAP') == (0, 1) and metric_bounds('abs_rel') is None
    runs = {'run': {'train': same, 'val': {'mIoU': {2: 99.7}}}}  # one validation point near 100 %
    limits = plot_logs.plot(runs, None, 10, tmp_path / 'curves.png')
    assert limits['mIoU'][0] < 99.7 < limits['mIoU'][1] <= 100  # matplotlib alone would widen it to ~104.7
    assert cv2.imread(str(tmp_path / 'curves.png')) is not None


def test_validation_pictures_title_their_columns_and_show_a_class_legend(trained_quickstart):
    from heads.visualization.draw import caption, legend
    work_dir = trained_quickstart[1].parent
    grid = cv2.cvtColor(cv2.imread(str(work_dir / 'predictions.png')), cv2.COLOR_BGR2RGB)
    size, gap = (96, 128), 4  # the quickstart's images; side_by_side's gap
    for column, title in enumerate(['image', 'ground truth', 'prediction']):
        left = column * (size[1] + gap)
        expected = caption(np.zeros((0, size[1], 3), np.uint8), title)
        assert np.array_equal(grid[:18, left:left + size[1]], expected), title
    # the legend: the classes in view (of sky, ground, box, disc) in the dataset's colours, right of the panels
    from heads.datasets import SyntheticScenes
    meta = SyntheticScenes.METAINFO
    legend_part = grid[:, 3 * (size[1] + gap):]
    assert legend_part.shape[1] == 150 and legend_part.shape[0] == grid.shape[0]
    names = meta['classes'][:2]  # sky and ground are in every scene
    drawn = legend(names, meta['palette'][:2], grid.shape[0])
    assert np.array_equal(legend_part[:18 + 4], drawn[:18 + 4])  # the first entry: sky's colour and name
