"""Mask-classification inference against transformers' image processors on fixed logits, and the shared model
base class (targets, modes, predictions at the original size) through a small concrete subclass."""
import pytest
import torch
from mmengine.structures import BaseDataElement, InstanceData, PixelData
from torch import nn

from heads.io.labels import INSTANCE_OFFSET
from heads.losses.mask_classification import MaskClassificationLoss
from heads.models.mask_classifier import MaskClassificationModel, masks_from_semantic
from heads.models.mask_inference import instance_results, panoptic_map, semantic_scores

NUM_CLASSES = 5
SEED = 0


class TinyMaskModel(MaskClassificationModel):
    """A real (small) mask classifier: 4x4 patches -> per-query mask logits at H/4 x W/4 and class logits from the
    pooled features; two layers, the first an auxiliary prediction."""

    def __init__(self, queries=6, num_classes=NUM_CLASSES, **kwargs):
        super().__init__(num_classes, **kwargs)
        self.patches = nn.Conv2d(3, 16, 4, stride=4)
        self.masks = nn.ModuleList([nn.Conv2d(16, queries, 1), nn.Conv2d(16, queries, 1)])
        self.classes = nn.ModuleList([nn.Linear(16, queries * (num_classes + 1)) for _ in range(2)])

    def forward_logits(self, inputs):
        x = self.patches(inputs)
        layers = [(cls(x.mean((2, 3))).view(len(x), -1, self.num_classes + 1), mask(x))
                  for cls, mask in zip(self.classes, self.masks)]
        return layers[-1][0], layers[-1][1], layers[:-1]


def fixed_logits(size=(16, 16), queries=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    class_logits = torch.randn(1, queries, NUM_CLASSES + 1, generator=g) * 4
    coarse = torch.randn(1, queries, 4, 4, generator=g) * 6  # smooth blobs, so that segments are large
    mask_logits = nn.functional.interpolate(coarse, size=size, mode='bilinear', align_corners=False)
    return class_logits, mask_logits


def panoptic_logits(queries=10, seed=0):
    """Queries that each own a region of a 4x4 grid (logit +6 there, -6 elsewhere, plus noise), most with a
    confident class: the pixels are shared out among several segments."""
    g = torch.Generator().manual_seed(seed)
    owner = torch.randint(0, queries, (4, 4), generator=g)
    coarse = (owner[None] == torch.arange(queries)[:, None, None]).float() * 12 - 6
    coarse = coarse + torch.randn(queries, 4, 4, generator=g)
    mask_logits = nn.functional.interpolate(coarse[None], size=(16, 16), mode='bilinear', align_corners=False)
    labels = torch.randint(0, NUM_CLASSES + 1, (queries,), generator=g)
    class_logits = nn.functional.one_hot(labels, NUM_CLASSES + 1) * 5.0 + torch.randn(queries, NUM_CLASSES + 1,
                                                                                      generator=g)
    return class_logits[None], mask_logits


def hf_outputs(class_logits, mask_logits):
    from transformers.utils import ModelOutput
    return ModelOutput(class_queries_logits=class_logits, masks_queries_logits=mask_logits, patch_offsets=None)


def test_semantic_scores_by_hand():
    class_logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))  # q=2, c=2 + no-object
    mask_logits = torch.tensor([[[0.0]], [[2.0]]])
    p = torch.sigmoid(torch.tensor(2.0))
    expected = torch.tensor([0.5 * 0.5 + 0.1 * p, 0.3 * 0.5 + 0.1 * p]).view(2, 1, 1)
    torch.testing.assert_close(semantic_scores(class_logits, mask_logits), expected)


def test_semantic_prediction_equals_mask2former_processor():
    transformers = pytest.importorskip('transformers')
    class_logits, mask_logits = fixed_logits(size=(96, 96))
    processor = transformers.Mask2FormerImageProcessor()  # resizes mask logits to 384x384 first: our input size
    theirs = processor.post_process_semantic_segmentation(hf_outputs(class_logits, mask_logits),
                                                          target_sizes=[(500, 333)], return_segmentation_scores=True)
    model = TinyMaskModel()
    sample = BaseDataElement(metainfo=dict(img_shape=(384, 384), ori_shape=(500, 333)))
    model.store_predictions(sample, class_logits[0], mask_logits[0], (384, 384))
    torch.testing.assert_close(sample.seg_logits.data, theirs[0].segmentation_scores, rtol=1e-5, atol=1e-6)
    assert torch.equal(sample.pred_sem_seg.data[0], theirs[0].segmentation)
    assert len(sample.pred_sem_seg.data.unique()) > 1


def test_instances_equal_mask2former_processor():
    transformers = pytest.importorskip('transformers')
    class_logits, mask_logits = fixed_logits(size=(384, 384), queries=10, seed=1)
    threshold = 0.05
    theirs = transformers.Mask2FormerImageProcessor().post_process_instance_segmentation(
        hf_outputs(class_logits, mask_logits), threshold=threshold, return_binary_maps=True)[0]
    masks, labels, scores = instance_results(class_logits[0], mask_logits[0], score_threshold=threshold)
    assert len(scores) == 10 and (scores[:-1] >= scores[1:]).all()  # top-k = queries, best first
    nonempty = masks.flatten(1).any(1)
    order = sorted(range(len(theirs['segments_info'])), key=lambda i: -theirs['segments_info'][i]['score'])
    assert len(order) == int(nonempty.sum()) >= 3
    for ours_index, i in zip(nonempty.nonzero().flatten().tolist(), order):
        info = theirs['segments_info'][i]
        assert labels[ours_index].item() == info['label_id']
        assert abs(scores[ours_index].item() - info['score']) < 1e-6
        assert torch.equal(masks[ours_index], theirs['segmentation'][i].bool())


def test_instance_scores_by_hand():
    class_logits = torch.log(torch.tensor([[0.6, 0.3, 0.1], [0.15, 0.25, 0.6]]))
    mask_logits = torch.tensor([[[1.0, -1.0]], [[3.0, 2.0]]])  # '2 1 2'
    masks, labels, scores = instance_results(class_logits, mask_logits, top_k=3)
    s1, s3, s2 = torch.sigmoid(torch.tensor([1.0, 3.0, 2.0]))
    # the top 3 (query, class) pairs by class probability: (q0, c0) 0.6, (q0, c1) 0.3, (q1, c1) 0.25; each times
    # its mask's mean probability inside the mask (q0: pixel 0 only; q1: both pixels)
    assert labels.tolist() == [0, 1, 1]
    torch.testing.assert_close(scores, torch.tensor([0.6 * s1, 0.25 * (s3 + s2) / 2, 0.3 * s1]))
    assert masks.tolist() == [[[True, False]], [[True, True]], [[True, False]]]
    _, labels, scores = instance_results(class_logits, mask_logits, top_k=3, stuff_classes=[0])
    assert labels.tolist() == [1, 1]
    torch.testing.assert_close(scores, torch.stack([0.25 * (s3 + s2) / 2, 0.3 * s1]))
    assert len(instance_results(class_logits, mask_logits, top_k=3, score_threshold=0.3)[0]) == 1


def test_panoptic_map_equals_eomt_processor_through_the_model():
    """The image was resized to 43x64 (long side 64) and padded to 64x64; its original size is 64x96 (h x w).
    transformers' EoMT processor does the same resizing: logits to the padded size, cropped, resized to the
    original size; then both assign the pixels."""
    transformers = pytest.importorskip('transformers')
    class_logits, mask_logits = panoptic_logits(seed=SEED)
    stuff = [0, 2]  # class 2 has two segments: merged
    processor = transformers.EomtImageProcessor()
    theirs = processor.post_process_panoptic_segmentation(
        hf_outputs(class_logits, mask_logits), target_sizes=[(64, 96)], threshold=0.8, stuff_classes=stuff,
        size={'shortest_edge': 64, 'longest_edge': 64})[0]
    model = TinyMaskModel(test_cfg=dict(tasks=('panoptic',), stuff_classes=stuff))
    sample = BaseDataElement(metainfo=dict(img_shape=(43, 64), ori_shape=(64, 96)))
    model.store_predictions(sample, class_logits[0], mask_logits[0], (64, 64))
    ours = sample.pred_panoptic_seg.data[0]
    segments = sample.pred_panoptic_seg.metainfo['segments_info']
    assert ours.shape == (64, 96) and ours.dtype == torch.int64
    assert len(segments) == len(theirs['segments_info']) >= 3
    assert torch.equal(ours == NUM_CLASSES, theirs['segmentation'] == -1)
    for mine, info in zip(segments, theirs['segments_info']):
        assert mine['label'] == info['label_id'] and abs(mine['score'] - info['score']) < 1e-6
        assert torch.equal(ours == mine['id'], theirs['segmentation'] == info['id'])
        assert mine['id'] % INSTANCE_OFFSET == mine['label']
    assert any(not s['isthing'] for s in segments) and any(s['isthing'] for s in segments)


def test_model_resizes_only_the_queries_it_uses():
    """Instances through the model (only the top-k pairs' queries resized) equal instance_results on every query's
    logits resized to the original size; a panoptic map without confident queries still has the original size."""
    class_logits, mask_logits = fixed_logits(size=(16, 16), queries=10, seed=3)
    model = TinyMaskModel(test_cfg=dict(tasks=('instance', 'panoptic'), top_k=4))
    sample = BaseDataElement(metainfo=dict(img_shape=(43, 64), ori_shape=(64, 96)))
    model.store_predictions(sample, class_logits[0], mask_logits[0], (64, 64))
    full = nn.functional.interpolate(mask_logits, size=(64, 64), mode='bilinear', align_corners=False)[..., :43, :]
    full = nn.functional.interpolate(full, size=(64, 96), mode='bilinear', align_corners=False)
    masks, labels, scores = instance_results(class_logits[0], full[0], top_k=4)
    assert len(labels) == 4 and len(set(labels.tolist())) > 1
    assert torch.equal(sample.pred_instances.masks, masks) and torch.equal(sample.pred_instances.labels, labels)
    torch.testing.assert_close(sample.pred_instances.scores, scores)
    no_object = torch.zeros(10, NUM_CLASSES + 1)
    no_object[:, -1] = 9.0
    model.store_predictions(sample, no_object, mask_logits[0], (64, 64))
    assert sample.pred_panoptic_seg.data.shape == (1, 64, 96) and (sample.pred_panoptic_seg.data == NUM_CLASSES).all()


def test_panoptic_drops_a_query_that_wins_too_little_of_its_mask():
    class_logits = torch.tensor([[9.0, 0, 0], [0, 9.0, 0]])  # both confident: class 0, class 1
    mask_logits = torch.full((2, 1, 10), -9.0)
    mask_logits[0, 0, :8] = 9.0  # query 0 covers 0..7
    mask_logits[1, 0, :] = 9.5  # query 1 covers all and wins every pixel: query 0 keeps 0% of its mask
    panoptic, segments = panoptic_map(class_logits, mask_logits)
    assert [s['label'] for s in segments] == [1] and (panoptic == 1).all()
    mask_logits[1, 0, :5] = -9.0  # query 1 now covers 5..9: query 0 wins 0..4 = 5/8 of its mask < 0.8 -> dropped
    panoptic, segments = panoptic_map(class_logits, mask_logits)
    assert [s['label'] for s in segments] == [1] and panoptic[0, 0].tolist() == [2] * 5 + [1] * 5


def test_panoptic_numbers_things_and_merges_stuff():
    class_logits = torch.tensor([[9.0, 0, 0, 0]] * 2 + [[0, 0, 9.0, 0]] * 2)  # two of class 0, two of class 2
    mask_logits = torch.full((4, 1, 8), -9.0)
    for q in range(4):
        mask_logits[q, 0, 2 * q:2 * q + 2] = 9.0
    panoptic, _ = panoptic_map(class_logits, mask_logits, stuff_classes=[2])
    assert panoptic[0, 0].tolist() == [0, 0, INSTANCE_OFFSET, INSTANCE_OFFSET, 2, 2, 2, 2]


def test_slide_mode_averages_semantic_scores_over_windows():
    model = TinyMaskModel(test_cfg=dict(mode='slide', crop_size=(32, 32), stride=(32, 16))).eval()
    x = torch.randn(1, 3, 32, 64)
    sample = BaseDataElement(metainfo=dict(img_shape=(32, 60), ori_shape=(32, 60)))
    with torch.no_grad():
        model.predict(x, [sample])
        windows = [model.semantic_inference(x[..., left:left + 32]) for left in (0, 16, 32)]
    expected = torch.zeros(1, NUM_CLASSES, 32, 64)
    count = torch.zeros(1, 1, 32, 64)
    for left, window in zip((0, 16, 32), windows):
        expected[..., left:left + 32] += window
        count[..., left:left + 32] += 1
    torch.testing.assert_close(sample.seg_logits.data, (expected / count)[0, :, :, :60])
    with pytest.raises(ValueError, match='semantic results only'):
        TinyMaskModel(test_cfg=dict(mode='slide', tasks=('panoptic',), crop_size=(32, 32), stride=(16, 16)))


def test_targets_from_semantic_labels_and_from_instances():
    seg = torch.tensor([[0, 0, 3], [255, 3, 3]], dtype=torch.uint8)
    classes, masks = masks_from_semantic(seg, NUM_CLASSES)
    assert classes.tolist() == [0, 3] and masks.dtype == torch.bool
    assert masks[0].tolist() == [[True, True, False], [False, False, False]]
    assert masks[1].tolist() == [[False, False, True], [False, True, True]]
    with pytest.raises(ValueError, match='num_classes=5'):
        masks_from_semantic(torch.tensor([[7]]), NUM_CLASSES)
    model = TinyMaskModel()
    sample = BaseDataElement()
    sample.gt_instances = InstanceData(labels=torch.tensor([4, 4]), masks=torch.ones(2, 2, 3, dtype=torch.bool))
    sample.gt_sem_seg = PixelData(data=seg[None])  # gt_instances win
    labels, masks = model.targets([sample], (4, 4))
    assert labels[0].tolist() == [4, 4] and masks[0].shape == (2, 4, 4) and masks[0].sum() == 12
    with pytest.raises(ValueError, match='neither gt_instances nor gt_sem_seg'):
        model.targets([BaseDataElement()], (4, 4))


def test_model_modes_loss_and_predict():
    model = TinyMaskModel(loss=dict(num_points=64), test_cfg=dict(tasks=('semantic', 'instance', 'panoptic')))
    images = [torch.randint(0, 255, (3, 30, 44), dtype=torch.uint8), torch.randint(0, 255, (3, 32, 40),
                                                                                    dtype=torch.uint8)]
    segs = [torch.randint(0, NUM_CLASSES, (30, 44)), torch.randint(0, NUM_CLASSES, (32, 40))]
    samples = []
    for seg in segs:
        s = BaseDataElement(metainfo=dict(ori_shape=tuple(seg.shape)))
        s.gt_sem_seg = PixelData(data=seg[None].to(torch.uint8))
        samples.append(s)
    data = model.data_preprocessor({'inputs': images, 'data_samples': samples}, training=True)
    class_logits, mask_logits = model(data['inputs'], mode='tensor')
    assert class_logits.shape == (2, 6, NUM_CLASSES + 1) and mask_logits.shape == (2, 6, 8, 16)
    torch.manual_seed(5)
    losses = model(**data, mode='loss')
    assert len(losses) == 6 and {'loss_cls', 'loss_mask', 'loss_dice', 'loss_cls_0'} <= set(losses)
    # the same as the criterion on hand-derived targets, padded to the batch's 32x64 input (ignored pixels: none)
    labels = [seg.unique() for seg in segs]
    masks = [nn.functional.pad(seg[None] == lab[:, None, None], (0, 64 - seg.shape[1], 0, 32 - seg.shape[0]))
             for seg, lab in zip(segs, labels)]
    c, m, aux = model.forward_logits(data['inputs'])
    torch.manual_seed(5)
    expected = MaskClassificationLoss(NUM_CLASSES, num_points=64)([('', c, m), ('_0', *aux[0])], labels, masks)
    for key in expected:
        torch.testing.assert_close(losses[key], expected[key])
    sum(losses.values()).backward()
    assert model.patches.weight.grad.abs().sum() > 0
    model.eval()
    data = model.data_preprocessor({'inputs': images, 'data_samples': samples}, training=False)
    with torch.no_grad():
        out = model(**data, mode='predict')
    for sample, seg in zip(out, segs):
        assert sample.seg_logits.data.shape == (NUM_CLASSES, *seg.shape)
        assert sample.pred_sem_seg.data.shape == (1, *seg.shape)
        assert sample.pred_instances.masks.shape[1:] == seg.shape and len(sample.pred_instances.scores) == 6
        assert sample.pred_panoptic_seg.data.shape == (1, *seg.shape)
    with pytest.raises(ValueError, match='test_cfg tasks'):
        TinyMaskModel(test_cfg=dict(tasks=('depth',)))
    with pytest.raises(ValueError, match='num_classes must be below 1000'):
        TinyMaskModel(num_classes=1000, test_cfg=dict(tasks='panoptic'))
