"""Segmentor / DepthEstimator: batching, losses, inference strategies, outputs per image, Predictor."""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.structures import BaseDataElement, PixelData

import heads
from heads.models.inference import flip_average, slide_inference, window_starts

from ..reference import sample_street, tiny_dpt


def sample(label=None, depth=None, **meta):
    s = BaseDataElement(metainfo=meta)
    if label is not None:
        s.gt_sem_seg = PixelData(data=label[None])
    if depth is not None:
        s.gt_depth = PixelData(data=depth[None])
    return s


def test_preprocessor_normalises_and_pads_images_and_labels():
    pre = heads.DensePreprocessor(mean=(10, 20, 30), std=(2, 4, 5), size_divisor=32)
    images = [torch.full((3, 40, 50), 50, dtype=torch.uint8), torch.full((3, 20, 70), 50, dtype=torch.uint8)]
    samples = [sample(torch.zeros(40, 50, dtype=torch.uint8)), sample(torch.ones(20, 70, dtype=torch.uint8))]
    out = pre({'inputs': images, 'data_samples': samples}, training=True)
    batch = out['inputs']
    assert batch.shape == (2, 3, 64, 96)
    torch.testing.assert_close(batch[0, :, 0, 0], torch.tensor([20.0, 7.5, 4.0]))
    assert batch[0, :, 40:].abs().sum() == 0 and batch[1, :, :, 70:].abs().sum() == 0
    label = out['data_samples'][1].gt_sem_seg.data[0]
    assert label.shape == (64, 96) and (label[20:] == 255).all() and (label[:20, :70] == 1).all()
    assert out['data_samples'][1].metainfo['img_shape'] == (20, 70)


def test_imagenet_mean_and_std_on_the_0_255_scale_are_written_once():
    """heads.models.preprocessor derives them from zoo.registry's 0-1 values; models and tools import them."""
    from heads.models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
    assert IMAGENET_MEAN_255 == (123.675, 116.28, 103.53) and IMAGENET_STD_255 == (58.395, 57.12, 57.375)
    pre = heads.DensePreprocessor()
    assert pre.mean.flatten().tolist() == torch.tensor(IMAGENET_MEAN_255).tolist()
    root = Path(__file__).resolve().parents[2]
    written = sorted(str(path.relative_to(root)) for folder in ('zoo', 'heads', 'tools')
                     for path in (root / folder).rglob('*.py') if '123.675' in path.read_text(encoding='utf-8'))
    assert written == ['heads/models/preprocessor.py'], f'ImageNet 0-255 values written again in {written}'


def test_segmentor_losses_and_gradients():
    model = heads.MODELS.build(tiny_dpt('seg')).eval()  # eval: no dropout, so the aux loss can be recomputed
    x = torch.randn(2, 3, 64, 96)
    labels = torch.randint(0, 11, (2, 64, 96))
    labels[:, :8] = 255
    losses = model(x, [sample(label) for label in labels], mode='loss')
    assert set(losses) == {'loss_ce', 'loss_aux'}
    aux = torch.nn.functional.interpolate(model.auxiliary_head(model.extract_features(x)[-1]), size=(64, 96),
                                          mode='bilinear', align_corners=False)
    expected_aux = 0.4 * torch.nn.functional.cross_entropy(aux, labels, ignore_index=255)
    torch.testing.assert_close(losses['loss_aux'], expected_aux, atol=1e-4, rtol=1e-4)
    sum(losses.values()).backward()
    assert model.backbone.patch_embed.proj.weight.grad.abs().sum() > 0


def test_depth_estimator_losses_for_metric_and_relative_heads():
    depth = torch.rand(2, 64, 64) * 3 + 0.5
    depth[:, :4] = 0  # invalid
    for mode in ('metric', 'relative'):
        model = heads.MODELS.build(tiny_dpt(mode))
        losses = model(torch.randn(2, 3, 64, 64), [sample(depth=d) for d in depth], mode='loss')
        assert torch.isfinite(losses['loss_depth'])
        losses['loss_depth'].backward()
    assert type(model.loss_fn).__name__ == 'ScaleShiftInvariantLoss'


def test_window_origins_cover_the_image_with_the_last_flush():
    assert window_starts(10, 4, 3) == [0, 3, 6]
    assert window_starts(10, 4, 4) == [0, 4, 6]
    assert window_starts(3, 4, 2) == [0]


def test_slide_inference_of_a_pointwise_model_is_the_model():
    conv = torch.nn.Conv2d(3, 2, 1)
    x = torch.randn(1, 3, 37, 53)
    with torch.no_grad():
        torch.testing.assert_close(slide_inference(conv, x, crop=(16, 24), stride=(10, 13)), conv(x))


def test_slide_equals_whole_when_one_crop_covers_the_image_and_works_below_crop_size():
    model = heads.MODELS.build(tiny_dpt('seg')).eval()
    slide = heads.MODELS.build(tiny_dpt('seg', test_cfg=dict(mode='slide', crop_size=(64, 96), stride=(32, 32))))
    slide.load_state_dict(model.state_dict())
    slide.eval()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        torch.testing.assert_close(slide.inference(x), model.inference(x))
        small = torch.randn(1, 3, 32, 48)  # smaller than the crop in both directions
        assert slide.inference(small).shape == (1, 11, 32, 48)


def test_flip_tta_of_a_mirror_symmetric_image_is_mirror_symmetric():
    model = heads.MODELS.build(tiny_dpt('seg', test_cfg=dict(flip=True))).eval()
    half = torch.randn(1, 3, 64, 48)
    x = torch.cat([half, half.flip(-1)], dim=-1)
    with torch.no_grad():
        out = model.inference(x)
        torch.testing.assert_close(out, out.flip(-1))
        torch.testing.assert_close(out, flip_average(model.predict_tensor, x))


def test_predictions_are_cut_from_padding_and_resized_to_the_original_size():
    model = heads.MODELS.build(tiny_dpt('seg')).eval()
    data = {'inputs': [torch.randint(0, 255, (3, 50, 70), dtype=torch.uint8)],
            'data_samples': [sample(ori_shape=(100, 140))]}
    data = model.data_preprocessor(data)
    with torch.no_grad():
        out = model(data['inputs'], data['data_samples'], mode='predict')[0]
    assert out.pred_sem_seg.data.shape == (1, 100, 140) and out.seg_logits.data.shape == (11, 100, 140)


def test_predictor_on_real_images():
    seg = heads.Predictor(dict(model=tiny_dpt('seg')))
    image = sample_street()  # a real CamVid frame at 240x180, committed with the tests
    labels = seg(image)
    assert labels.shape == (180, 240) and labels.dtype == np.int64 and labels.max() < 11
    depth = heads.Predictor(dict(model=tiny_dpt('metric'), predict_scale=(160, 120)))
    metres = depth(image)
    assert metres.shape == (180, 240) and metres.dtype == np.float32 and (metres > 0).all() and (metres < 10).all()


def test_predictor_names_bad_images(tmp_path):
    predictor = heads.Predictor(dict(model=tiny_dpt('seg')))
    broken = tmp_path / 'broken.jpg'
    broken.write_bytes(b'\xff\xd8\xff\xe0 not really a jpeg')
    with pytest.raises(ValueError, match='broken.jpg'):
        predictor(broken)
    with pytest.raises(FileNotFoundError, match='missing.png'):
        predictor(tmp_path / 'missing.png')
    with pytest.raises(ValueError, match=r'RGB uint8 array of shape \(H, W, 3\), got a float64 array'):
        predictor(np.zeros((10, 10, 3)))


def test_mmengine_train_and_val_steps_with_a_deit_backbone_and_add_readout():
    from mmengine.optim import OptimWrapper
    cfg = tiny_dpt('seg')
    cfg['backbone'] = dict(type='ZooBackbone', name='deit_tiny_distilled_patch16_224', depth=4,
                           out_indices=(0, 1, 2, 3))
    cfg['neck'] = dict(cfg['neck'], readout='add')
    model = heads.MODELS.build(cfg)
    assert model.neck.reassemble[0].readout.add_indices == [0, 1]  # CLS and distillation tokens
    optimizer = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.01))
    images = [torch.randint(0, 255, (3, 48, 80), dtype=torch.uint8) for _ in range(2)]
    data = {'inputs': images, 'data_samples': [sample(torch.randint(0, 11, (48, 80))) for _ in range(2)]}
    before = model.backbone.prefix.dist.detach().clone()
    log_vars = model.train_step(data, optimizer)
    assert set(log_vars) == {'loss', 'loss_ce', 'loss_aux'} and torch.isfinite(log_vars['loss'])
    assert not torch.equal(model.backbone.prefix.dist, before)  # the dist token is trained through the readout
    model.eval()
    outputs = model.val_step({'inputs': images, 'data_samples': [sample(ori_shape=(48, 80)) for _ in range(2)]})
    assert outputs[0].pred_sem_seg.data.shape == (1, 48, 80)
