"""Mask2Former over zoo backbones (hierarchical Swin, plain ViT through the simple pyramid): output shapes on
non-square inputs, one training step that lowers the loss on a fixed batch, and predictions of every task."""
import pytest
import torch
from mmengine.structures import InstanceData, PixelData
from mmengine.structures.base_data_element import BaseDataElement

from heads.registry import MODELS

SWIN = dict(type='ZooBackbone', name='swin_tiny_patch4_window7_224', embed_dim=16, depths=[1, 1, 1, 1],
            num_heads=[1, 1, 2, 2], window=4)
CVT = dict(type='ZooBackbone', name='cvt_13_224', embed_dims=(16, 32, 64), num_heads=(1, 2, 2), depths=(1, 1, 1))
VIT = dict(type='ZooBackbone', name='vit_base_patch16_224', embed_dim=32, depth=2, num_heads=2, img_size=64)


def tiny(backbone, **kwargs):
    torch.manual_seed(0)
    return MODELS.build(dict(
        type='Mask2Former', backbone=backbone,
        pixel_decoder=dict(type='Mask2FormerPixelDecoder', channels=32, mask_channels=32, num_layers=1, num_heads=2,
                           ffn_channels=48),
        decoder=dict(type='Mask2FormerTransformerDecoder', num_classes=3, channels=32, mask_channels=32,
                     num_queries=5, num_layers=2, num_heads=2, ffn_channels=40),
        loss=dict(num_points=64), **kwargs))


@pytest.mark.parametrize('backbone', [SWIN, VIT, CVT], ids=['swin', 'vit', 'cvt'])
def test_logits_at_a_quarter_of_a_non_square_input(backbone):
    model = tiny(backbone).eval()
    with torch.no_grad():
        class_logits, mask_logits, aux = model.forward_logits(torch.randn(2, 3, 64, 96))
    assert class_logits.shape == (2, 5, 4) and mask_logits.shape == (2, 5, 16, 24)
    assert [tuple(c.shape) + tuple(m.shape) for c, m in aux] == [(2, 5, 4, 2, 5, 16, 24)] * 2
    assert (model.neck is None) == (backbone is not VIT)


def samples(n=2, size=64):
    torch.manual_seed(3)
    out = []
    for _ in range(n):
        seg = torch.zeros(1, size, size, dtype=torch.long)
        seg[:, : size // 2] = 1
        seg[:, size // 2:, size // 2:] = 2
        out.append(BaseDataElement(gt_sem_seg=PixelData(data=seg), metainfo=dict(img_shape=(size, size))))
    return out


@pytest.mark.parametrize('backbone', [SWIN, VIT], ids=['swin', 'vit'])
def test_one_training_step_reaches_every_part_and_lowers_the_loss(backbone):
    model = tiny(backbone).train()
    x, batch = torch.randn(2, 3, 64, 64), samples()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    torch.manual_seed(5)
    losses = model(x, batch, mode='loss')
    assert {'loss_cls', 'loss_mask', 'loss_dice', 'loss_cls_0', 'loss_dice_1'} <= set(losses)
    total = sum(losses.values())
    total.backward()
    for part in (model.backbone, model.pixel_decoder, model.decoder):
        assert sum(p.grad.abs().sum() for p in part.parameters() if p.grad is not None) > 0
    optimizer.step()
    torch.manual_seed(5)
    with torch.no_grad():
        assert sum(model(x, batch, mode='loss').values()) < total


def test_predictions_of_every_task():
    model = tiny(SWIN, test_cfg=dict(tasks=('semantic', 'instance', 'panoptic'))).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 64, 64), samples(), mode='predict')
    assert out[0].pred_sem_seg.data.shape == (1, 64, 64) and out[0].seg_logits.data.shape == (3, 64, 64)
    assert isinstance(out[0].pred_instances, InstanceData) and out[0].pred_instances.masks.shape[-2:] == (64, 64)
    assert out[1].pred_panoptic_seg.data.shape == (1, 64, 64)


def test_runner_steps_through_the_preprocessor_pad_and_predict_at_the_image_size():
    """train_step (the Runner's iteration: preprocessing with padding 60x60 -> 64x64, losses, optimizer step) then
    val_step: predictions at each image's own size."""
    from mmengine.optim import OptimWrapper
    model = tiny(SWIN)
    images = [torch.randint(0, 256, (3, 60, 60), dtype=torch.uint8) for _ in range(2)]
    batch = samples(size=60)
    log = model.train_step(dict(inputs=images, data_samples=batch),
                           OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.01)))
    assert torch.isfinite(log['loss']) and log['loss'] > 0 and 'loss_dice_0' in log
    model.eval()
    out = model.val_step(dict(inputs=images, data_samples=samples(size=60)))
    assert out[0].pred_sem_seg.data.shape == (1, 60, 60)
