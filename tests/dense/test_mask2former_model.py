"""Mask2Former over zoo backbones (hierarchical Swin, plain ViT through the simple pyramid): output shapes on
non-square inputs, one training step that lowers the loss on a fixed batch, and predictions of every task."""
import pytest
import torch
from mmengine.structures import InstanceData, PixelData
from mmengine.structures.base_data_element import BaseDataElement

from heads.registry import MODELS

from ..reference import perturb_

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


def predictions_of_every_task():
    """A perturbed tiny model's predictions of the three tasks (at its init one class wins everywhere) and its
    logits for the same two images."""
    model = tiny(SWIN, test_cfg=dict(tasks=('semantic', 'instance', 'panoptic'), object_threshold=0.3,
                                     overlap_threshold=0.5, stuff_classes=STUFF))
    perturb_(model, 0.1).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        return model(x, samples(), mode='predict'), model(x, mode='tensor')


STUFF = (0,)


def test_predictions_of_every_task():
    """Values, not only shapes: the semantic scores are the formula's (softmax class probabilities without no-object
    times sigmoid mask probabilities, summed over queries, masks resized to the image), the instances those of
    instance_results on the resized masks."""
    from heads.models.mask_inference import instance_results
    out, (class_logits, mask_logits) = predictions_of_every_task()
    assert out[0].pred_sem_seg.data.shape == (1, 64, 64) and out[0].seg_logits.data.shape == (3, 64, 64)
    assert isinstance(out[0].pred_instances, InstanceData) and out[0].pred_instances.masks.shape[-2:] == (64, 64)
    assert out[1].pred_panoptic_seg.data.shape == (1, 64, 64)
    masks = torch.nn.functional.interpolate(mask_logits, size=(64, 64), mode='bilinear', align_corners=False)
    scores = torch.einsum('bqc,bqhw->bchw', class_logits.softmax(-1)[..., :-1], masks.sigmoid())
    for image, sample in enumerate(out):
        torch.testing.assert_close(sample.seg_logits.data, scores[image])
        assert torch.equal(sample.pred_sem_seg.data[0], scores[image].argmax(0))
        assert (scores[image].amax((1, 2)) - scores[image].amin((1, 2))).min() > 1e-2  # scores that vary
        want = instance_results(class_logits[image], masks[image], stuff_classes=STUFF)
        got = sample.pred_instances
        assert torch.equal(got.masks, want[0]) and torch.equal(got.labels, want[1]) and len(got.labels) > 0
        torch.testing.assert_close(got.scores, want[2])


@pytest.mark.slow  # transformers' import
def test_panoptic_predictions_equal_transformers_eomt_processor():
    """The model's panoptic maps equal transformers' EoMT processor's on the same logits (segments, labels,
    scores, pixels; at least one segment per image)."""
    transformers = pytest.importorskip('transformers')
    from heads.io.labels import INSTANCE_OFFSET
    out, (class_logits, mask_logits) = predictions_of_every_task()
    theirs = transformers.EomtImageProcessor().post_process_panoptic_segmentation(
        transformers.models.eomt.modeling_eomt.EomtForUniversalSegmentationOutput(
            class_queries_logits=class_logits, masks_queries_logits=mask_logits),
        target_sizes=[(64, 64)] * 2, threshold=0.3, overlap_mask_area_threshold=0.5, stuff_classes=list(STUFF),
        size={'shortest_edge': 64, 'longest_edge': 64})
    for sample, reference in zip(out, theirs):
        ours, segments = sample.pred_panoptic_seg.data[0], sample.pred_panoptic_seg.metainfo['segments_info']
        assert len(segments) == len(reference['segments_info']) >= 1
        assert torch.equal(ours == 3, reference['segmentation'] == -1)
        for mine, info in zip(segments, reference['segments_info']):
            assert mine['label'] == info['label_id'] and abs(mine['score'] - info['score']) < 1e-6
            assert torch.equal(ours == mine['id'], reference['segmentation'] == info['id'])
            assert mine['id'] % INSTANCE_OFFSET == mine['label']


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
