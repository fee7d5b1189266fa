"""UperNet (UPerHead + FCN auxiliary head) as a Segmentor over zoo backbones: the output contract
(``mode='tensor'``: semantic logits 'b c h w' at the input size; ``mode='predict'``: ``pred_sem_seg``), the levels each
head reads, the auxiliary loss's weight, and configs/upernet_vitt4_camvid_cpu.py training one iteration."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.structures import BaseDataElement, PixelData

import heads
from heads.necks import PyramidLevels, SimpleFeaturePyramid

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'
#: One per family kind: plain (ViT/16, DINOv2/14: through the simple pyramid) and hierarchical (as they are).
BACKBONES = {
    'vit_tiny_patch16_224': dict(depth=2),
    'vit_small_patch14_dinov2': dict(depth=2, embed_dim=64, num_heads=2, img_size=56),
    'swin_tiny_patch4_window7_224': dict(depths=(1, 1, 1, 1), embed_dim=16, num_heads=(1, 2, 2, 4)),
    'cvt_13_224': dict(depths=(1, 1, 1)),
    'coatnet_0_rw_224': dict(depths=(1, 1, 1, 1)),
}


def upernet(name: str, **options) -> torch.nn.Module:
    torch.manual_seed(0)
    return heads.MODELS.build(dict(
        type='Segmentor', backbone=dict(type='ZooBackbone', name=name, **options),
        neck=dict(type='PyramidLevels', out_channels=32), decode_head=dict(type='UPerHead', num_classes=5, channels=32),
        auxiliary_head=dict(type='FCNHead', num_classes=5, channels=16))).eval()


@pytest.mark.parametrize('name', BACKBONES)
def test_tensor_and_predict_over_zoo_backbones(name):
    model = upernet(name, **BACKBONES[name])
    plain = len(set(model.backbone.out_strides)) == 1
    assert (model.neck.pyramid is not None) == plain
    assert model.neck.level_strides[-1] <= 32 and model.neck.level_strides == sorted(model.neck.level_strides)
    size = (112, 168) if 'patch14' in name else (112, 160)  # whole patches
    x = torch.randn(1, 3, *size)
    sample = BaseDataElement(metainfo=dict(img_shape=size, ori_shape=size))
    with torch.no_grad():
        logits = model(x, mode='tensor')
        pred = model(x, [sample], mode='predict')[0]
    assert logits.shape == (1, 5, *size) and torch.isfinite(logits).all()
    assert torch.equal(pred.pred_sem_seg.data, logits[0].argmax(0, keepdim=True))


def test_plain_levels_are_the_simple_pyramid_without_its_pooled_level():
    levels = PyramidLevels([64], [16], out_channels=8)
    pyramid = SimpleFeaturePyramid([64], [16], out_channels=8)
    pyramid.load_state_dict({k[len('pyramid.'):]: v for k, v in levels.state_dict().items()})
    x = torch.randn(1, 64, 6, 10)
    got, want = levels([x]), pyramid([x])[:-1]
    assert [m.shape[-1] for m in got] == [5, 10, 20, 40]  # deepest first: 1/32 ... 1/4 of 160
    assert all(torch.equal(a, b) for a, b in zip(got, want[::-1]))


def test_heads_read_the_levels_finest_first_and_the_aux_head_level_in_index():
    model = upernet('swin_tiny_patch4_window7_224', **BACKBONES['swin_tiny_patch4_window7_224'])
    assert model.decode_head.in_channels == [16, 32, 64, 128]  # from the neck: the stages' widths
    assert model.auxiliary_head.convs[0].conv.in_channels == 64  # level 2: stride 16
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        levels = model.extract_features(x)[::-1]
        assert model.decode_head(levels).shape[-2:] == (16, 24)  # stride 4
        assert model.auxiliary_head(levels).shape[-2:] == (4, 6)  # stride 16


def test_the_auxiliary_loss_is_its_weight_times_its_cross_entropy():
    model = upernet('swin_tiny_patch4_window7_224', **BACKBONES['swin_tiny_patch4_window7_224']).eval()
    x = torch.randn(2, 3, 64, 64)
    labels = torch.randint(0, 5, (2, 1, 64, 64))
    labels[:, :, :8] = 255
    samples = [BaseDataElement(gt_sem_seg=PixelData(data=y)) for y in labels]
    with torch.no_grad():
        losses = model(x, samples, mode='loss')
        levels = model.extract_features(x)[::-1]
        aux = F.interpolate(model.auxiliary_head(levels), size=(64, 64), mode='bilinear', align_corners=False)
        main = F.interpolate(model.decode_head(levels), size=(64, 64), mode='bilinear', align_corners=False)
    assert torch.allclose(losses['loss_aux'], 0.4 * F.cross_entropy(aux, labels[:, 0], ignore_index=255))
    assert torch.allclose(losses['loss_ce'], F.cross_entropy(main, labels[:, 0], ignore_index=255))


def one_camvid_step(model, optim_wrapper: dict):
    """One ``train_step`` of ``model`` on two random 64x96 images with CamVid's 11 classes: the log, the optimizer
    wrapper built from ``optim_wrapper`` and the top-level parts whose state the step changed."""
    wrapper = build_optim_wrapper(model, optim_wrapper)
    images = [torch.randint(0, 256, (3, 64, 96), dtype=torch.uint8) for _ in range(2)]
    samples = [BaseDataElement(gt_sem_seg=PixelData(data=torch.randint(0, 11, (1, 64, 96)))) for _ in range(2)]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    log = model.train_step(dict(inputs=images, data_samples=samples), wrapper)
    changed = {k.split('.')[0] for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    return log, wrapper, changed


def test_the_camvid_cpu_config_builds_and_trains_one_iteration():
    cfg = Config.fromfile(str(CONFIGS / 'upernet_vitt4_camvid_cpu.py'))
    cfg.model.backbone.update(depth=2, out_indices=(0, 1))
    torch.manual_seed(0)
    model = heads.MODELS.build(cfg.model)
    assert model.decode_head.in_channels == [64] * 4 and model.auxiliary_head.conv_seg.out_channels == 11
    log, _, changed = one_camvid_step(model, cfg.optim_wrapper)
    assert {'loss_ce', 'loss_aux'} <= set(log) and all(torch.isfinite(v) for v in log.values())
    assert {'backbone', 'neck', 'decode_head', 'auxiliary_head'} <= changed


def test_the_camvid_cpu_config_is_the_dpt_one_but_for_the_model_and_fits_any_backbone():
    """tools/compare.py --heads: data, schedule and evaluation as configs/dpt_vitt4_camvid_cpu.py; each backbone of
    the grid builds (plain through the simple pyramid, hierarchical as they are), the heads sized from the neck."""
    from lab.benchmark.compare import check_only_backbones_differ, head_backbone_grid
    configs = {name: Config.fromfile(str(CONFIGS / f'{name}.py')) for name in ('dpt_vitt4_camvid_cpu',
                                                                                 'upernet_vitt4_camvid_cpu')}
    check_only_backbones_differ(configs, 'heads')
    grid = head_backbone_grid({'upernet': configs['upernet_vitt4_camvid_cpu']},
                              ['vit_tiny_patch16_224:{"depth": 4}', 'cvt_13_224', 'swin_tiny_patch4_window7_224'])
    with torch.device('meta'):
        widths = {label: heads.MODELS.build(cfg.model).decode_head.in_channels for label, cfg in grid.items()}
    assert widths == {'upernet+vit_tiny_patch16_224': [64] * 4, 'upernet+cvt_13_224': [64, 192, 384],
                      'upernet+swin_tiny_patch4_window7_224': [96, 192, 384, 768]}


@pytest.mark.parametrize('size', [(3, 4), (5, 7), (6, 6), (2, 9)])
def test_the_in_graph_adaptive_pool_averages_the_same_bins(size):
    """The pooling matrices an export uses (a symbolic size) pool the bins of adaptive_avg_pool2d, sizes that divide
    the scales or not, scales above the side included."""
    from heads.decode_heads.adaptive_pool import pooling_matrix
    x = torch.randn(2, 3, *size, dtype=torch.float64)
    for s in (1, 2, 3, 6):
        rows, cols = pooling_matrix(size[0], s, x), pooling_matrix(size[1], s, x)
        pooled = torch.einsum('ih,bchw,jw->bcij', rows, x, cols)  # b c h w -> b c s s
        assert torch.allclose(pooled, F.adaptive_avg_pool2d(x, s), rtol=0, atol=1e-12), (size, s)
