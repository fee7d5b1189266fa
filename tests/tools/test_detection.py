"""Detection export: pyramids, framework views, torchvision detectors, the CamVid COCO detection set and the
COCO metric. Expected values come from formulas (strides, shapes), scipy's connected-component labelling and
pycocotools' evaluation of the ground truth itself."""
import json

import cv2
import make_camvid_detection
import numpy as np
import pytest
import torch
from mmengine.structures import BaseDataElement
from scipy import ndimage

import zoo
from heads.datasets import CocoDetectionDataset
from heads.datasets.coco import ann_to_mask
from heads.detection import (
    Detectron2View,
    MMDetView,
    PyramidBackbone,
    TorchvisionView,
    ZooMMDetBackbone,
    build_detector,
)
from heads.evaluation.coco import CocoDetectionMetric
from heads.necks import HierarchicalFPN, SimpleFeaturePyramid
from heads.registry import MODELS
from heads.visualization.draw import draw_boxes

from ..reference import shared_data

TINY = {'vit_tiny_patch16_224': dict(depth=2), 'deit_tiny_distilled_patch16_224': dict(depth=2),
        'cvt_13_224': dict(depths=(1, 1, 1)), 'coatnet_0_224': dict(depths=(1, 1, 1, 1)),
        'swin_tiny_patch4_window7_224': dict(depths=(1, 2, 1, 1)),
        'pit_s_224': dict(depths=(1, 1, 1)), 'vit_small_patch14_dinov2': dict(depth=2)}


@pytest.mark.parametrize('name, strides', [('vit_tiny_patch16_224', [4, 8, 16, 32, 64]),
                                           ('deit_tiny_distilled_patch16_224', [4, 8, 16, 32, 64]),
                                           ('cvt_13_224', [4, 8, 16, 32]),
                                           ('coatnet_0_224', [4, 8, 16, 32, 64]),
                                           ('swin_tiny_patch4_window7_224', [4, 8, 16, 32, 64]),
                                           ('pit_s_224', [8, 16, 32, 64]),
                                           ('vit_small_patch14_dinov2', [4, 8, 16, 32, 64])])
def test_pyramid_levels_have_their_strides_and_width(name, strides):
    torch.manual_seed(0)
    backbone = PyramidBackbone(name, out_channels=32, **TINY[name]).eval()
    assert backbone.out_strides == strides and backbone.out_channels == [32] * len(strides)
    expected = SimpleFeaturePyramid if name.startswith(('vit', 'deit')) else HierarchicalFPN
    assert isinstance(backbone.pyramid, expected)
    with torch.no_grad():
        maps = backbone(torch.randn(2, 3, 128, 192))
    assert [tuple(m.shape) for m in maps] == [(2, 32, 128 // s, 192 // s) for s in strides]


def test_simple_pyramid_follows_vitdet_channel_rule():
    """ViTDet: x4 = two 2x2 transposed convs (c -> c/2 -> c/4), x2 one (c -> c/2), x1 nothing, x0.5 a 2x2 max-pool."""
    pyramid = SimpleFeaturePyramid([192], [16], out_channels=32)
    first_convs = [level[1][0] for level in pyramid.levels]  # the 1x1 projection after each resampler
    assert [conv.in_channels for conv in first_convs] == [48, 96, 192, 192]
    assert isinstance(pyramid.levels[3][0], torch.nn.MaxPool2d)
    x = torch.randn(1, 192, 6, 10)
    out = pyramid([x])
    assert [m.shape[-2:] for m in out] == [(24, 40), (12, 20), (6, 10), (3, 5), (2, 3)]
    torch.testing.assert_close(out[-1], out[-2][..., ::2, ::2])  # max_pool2d(k=1, s=2) is subsampling
    with pytest.raises(ValueError, match='powers of two'):
        SimpleFeaturePyramid([192], [16], out_strides=(4, 8, 12, 32))


def test_a_patch_14_map_is_regridded_to_stride_16_with_its_pixel_centres_in_place():
    """Cell j of a stride-14 map is centred on image pixel 14 (j + 1/2); filled with that position (a linear
    function, which bilinear resampling keeps exactly between the outermost centres), cell i of the regridded map
    holds 16 (i + 1/2), its own centre. 16 cells of stride 14 cover 224 pixels = 14 cells of stride 16."""
    pyramid = SimpleFeaturePyramid([2], [14], out_channels=8, out_strides=(16, 32))
    assert (pyramid.in_stride, pyramid.grid_stride) == (14, 16)
    ys, xs = torch.meshgrid(14 * (torch.arange(16.0) + 0.5), 14 * (torch.arange(12.0) + 0.5), indexing='ij')
    regridded = pyramid.regrid(torch.stack([ys, xs])[None])
    assert regridded.shape == (1, 2, 14, 10)  # 12 cells of 14 = 168 pixels = 10.5 cells of 16: floor
    centres = 16 * (torch.arange(14.0) + 0.5)
    inside = (centres > 7) & (centres < 14 * 15.5)  # between the first and last input centres (no clamping)
    torch.testing.assert_close(regridded[0, 0, inside, 0], centres[inside])
    torch.testing.assert_close(regridded[0, 1, 0, 1:-1], centres[1:9])


def test_a_map_too_narrow_for_the_finest_level_is_refused_naming_the_stride():
    """Two halvings from stride 16 to 4 leave 2 // 4 = 0 channels: a level of zero width would be a constant."""
    with pytest.raises(ValueError, match=r"from 2 channels at stride 16, stride 4 \(x4\) would have 0; give it a "
                                         r"map of at least 4 channels or leave stride 4 out of out_strides"):
        SimpleFeaturePyramid([2], [16], out_channels=8)
    assert SimpleFeaturePyramid([4], [16], out_channels=8).out_strides == [4, 8, 16, 32, 64]


def test_a_patch_14_pyramid_pads_the_input_and_crops_every_level_back():
    """A 96x128 image (multiples of 32, not of 14) is padded to 98x140 for the body; every level has the
    unpadded image's size over its stride, equal to the pyramid of the body run on the padded image, cropped."""
    torch.manual_seed(0)
    backbone = PyramidBackbone('vit_small_patch14_dinov2', out_channels=16, depth=2).eval()
    assert backbone.input_multiple == 32
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        maps = backbone(x)
        padded = backbone.pyramid(backbone.body(torch.nn.functional.pad(x, (0, 12, 0, 2))))
    assert [tuple(m.shape[-2:]) for m in maps] == [(96 // s, 128 // s) for s in backbone.out_strides[:-1]] + [(2, 2)]
    for kept, whole in zip(maps, padded):
        torch.testing.assert_close(kept, whole[..., :kept.shape[-2], :kept.shape[-1]])


def test_hierarchical_fpn_takes_the_last_map_at_each_stride():
    fpn = HierarchicalFPN([64, 192, 384, 384], [4, 8, 16, 16], out_channels=16)
    assert fpn.taps == [0, 1, 3] and fpn.out_strides == [4, 8, 16, 32]
    with pytest.raises(ValueError, match='two or more increasing strides'):
        HierarchicalFPN([192, 192], [16, 16])


def test_views_name_levels_for_each_framework():
    torch.manual_seed(0)
    pyramid = PyramidBackbone('vit_tiny_patch16_224', out_channels=32, depth=2).eval()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        maps = pyramid(x)
        tv, d2 = TorchvisionView(pyramid)(x), Detectron2View(pyramid)
        named, mm = d2(x), MMDetView(pyramid, out_indices=(0, 2))(x)
    assert list(tv) == ['0', '1', '2', '3', 'pool'] and TorchvisionView(pyramid).out_channels == 32
    assert list(named) == ['p2', 'p3', 'p4', 'p5', 'p6'] and d2.size_divisibility == 64
    assert d2.output_shape()['p4'].channels == 32 and d2.output_shape()['p4'].stride == 16
    for a, b in zip([*tv.values()], maps):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(named['p6'], maps[-1])
    assert isinstance(mm, tuple) and len(mm) == 2
    torch.testing.assert_close(mm[1], maps[2])
    plain = zoo.create_backbone('vit_tiny_patch16_224', depth=2, out_indices=(-1,))
    assert list(Detectron2View(plain).output_shape()) == ['last_feat']
    raw = MODELS.build(dict(type='ZooMMDetBackbone', name='cvt_13_224', depths=(1, 1, 1), out_indices=(0, 1, 2)))
    assert isinstance(raw, MMDetView) and raw.out_strides == [4, 8, 16] and raw.out_channels == [64, 192, 384]
    with pytest.raises(ValueError, match='one channel count'):
        TorchvisionView(raw.module)
    assert ZooMMDetBackbone('cvt_13_224', pyramid=True, out_channels=8, depths=(1, 1, 1)).out_channels == [8] * 4


@pytest.mark.parametrize('kind', ['fasterrcnn', pytest.param('maskrcnn', marks=pytest.mark.slow)])
@pytest.mark.parametrize('name', ['vit_tiny_patch16_224', 'cvt_13_224', 'vit_small_patch14_dinov2'])
def test_torchvision_detectors_train_and_detect(kind, name):
    torch.manual_seed(0)
    model = build_detector(kind, name, num_classes=3, out_channels=32, backbone_kwargs=TINY[name],
                           min_size=96, max_size=128)
    assert type(model).__name__ == {'fasterrcnn': 'FasterRCNN', 'maskrcnn': 'MaskRCNN'}[kind]
    assert model.backbone.out_channels == 32
    assert len(model.rpn.anchor_generator.sizes) == len(model.backbone.names)  # one anchor size per level
    mask = torch.zeros(1, 90, 120, dtype=torch.uint8)
    mask[0, 20:60, 30:90] = 1
    target = dict(boxes=torch.tensor([[30.0, 20.0, 90.0, 60.0]]), labels=torch.tensor([2]), masks=mask)
    losses = model([torch.rand(3, 90, 120)], [target])
    expected = {'loss_classifier', 'loss_box_reg', 'loss_objectness', 'loss_rpn_box_reg'}
    assert set(losses) == expected | ({'loss_mask'} if kind == 'maskrcnn' else set())
    sum(losses.values()).backward()
    body = model.backbone.module.body
    assert all(p.grad is not None for p in body.parameters() if p.requires_grad and p.dim() > 1)
    model.eval()
    with torch.no_grad():
        detections = model([torch.rand(3, 90, 120)])[0]
    assert {'boxes', 'scores', 'labels'} <= set(detections)
    assert detections['boxes'].shape[1:] == (4,) and (kind == 'fasterrcnn') == ('masks' not in detections)


def test_build_detector_names_the_known_kinds():
    with pytest.raises(ValueError, match='fasterrcnn'):
        build_detector('retinanet', 'vit_tiny_patch16_224', 3)
    with pytest.raises(KeyError, match='Known backbones'):
        build_detector('fasterrcnn', 'vit_tiny_patch17', 3)


# ------------------------------------------------------------------------------ CamVid as COCO detection
@pytest.fixture(scope='module')
def camvid_det(tmp_path_factory):
    out = tmp_path_factory.mktemp('camvid_det')
    make_camvid_detection.main([str(shared_data('camvid')), str(out), '--splits', 'val', '--min-area', '64'])
    return out


def test_camvid_components_are_the_connected_regions_of_car_and_pedestrian(camvid_det):
    coco = json.loads((camvid_det / 'annotations' / 'instances_val.json').read_text())
    assert [c['name'] for c in coco['categories']] == ['Car', 'Pedestrian'] and len(coco['images']) == 101
    for image in coco['images'][:5]:
        labels = cv2.imread(str(shared_data('camvid', 'annotations', 'val', image['file_name'][:-4] + '.png')),
                            cv2.IMREAD_UNCHANGED)
        assert (camvid_det / 'val' / image['file_name']).is_file()
        anns = [a for a in coco['annotations'] if a['image_id'] == image['id']]
        for category_id, label in ((1, 8), (2, 9)):
            regions, count = ndimage.label(labels == label, structure=np.ones((3, 3)))
            sizes = ndimage.sum_labels(np.ones_like(regions), regions, range(1, count + 1))
            expected = sorted(int(s) for s in sizes if s >= 64)
            mine = [a for a in anns if a['category_id'] == category_id]
            assert sorted(a['area'] for a in mine) == expected
            for a in mine:
                m = ann_to_mask(a['segmentation'], image['height'], image['width']).astype(bool)
                assert m.sum() == a['area'] and (labels[m] == label).all()
                ys, xs = np.nonzero(m)
                assert a['bbox'] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]


def test_coco_detection_dataset_gives_torchvision_targets(camvid_det):
    dataset = CocoDetectionDataset('annotations/instances_val.json', img_dir='val', data_root=str(camvid_det),
                                   with_masks=True)
    coco = json.loads((camvid_det / 'annotations' / 'instances_val.json').read_text())
    sample = dataset[0]
    anns = [a for a in coco['annotations'] if a['image_id'] == coco['images'][0]['id']]
    assert sample['inputs'].shape == (3, 360, 480) and sample['inputs'].dtype == torch.uint8
    target = sample['data_samples']
    x, y, w, h = anns[0]['bbox']
    assert target.boxes[0].tolist() == [x, y, x + w, y + h]
    assert target.labels.tolist() == [a['category_id'] for a in anns]
    assert target.masks.shape == (len(anns), 360, 480) and int(target.masks[0].sum()) == anns[0]['area']
    flipped = CocoDetectionDataset('annotations/instances_val.json', img_dir='val', data_root=str(camvid_det),
                                   with_masks=True, flip_prob=1.0)[0]
    torch.testing.assert_close(flipped['inputs'], sample['inputs'].flip(-1))
    assert flipped['data_samples'].boxes[0].tolist() == [480 - x - w, y, 480 - x, y + h]
    torch.testing.assert_close(flipped['data_samples'].masks, target.masks.flip(-1))


def test_coco_metric_scores_the_ground_truth_as_perfect(camvid_det):
    ann_file = str(camvid_det / 'annotations' / 'instances_val.json')
    coco = json.loads(open(ann_file).read())
    metric = CocoDetectionMetric(ann_file, iou_types=('bbox', 'segm'))
    dataset = CocoDetectionDataset(ann_file, img_dir=str(camvid_det / 'val'), with_masks=True)
    predictions = []
    for i in range(len(dataset)):
        target = dataset[i]['data_samples']
        predictions.append(BaseDataElement(metainfo=target.metainfo, boxes=target.boxes, labels=target.labels,
                                           scores=torch.ones(len(target.labels)),
                                           masks=target.masks[:, None].float()).to_dict())  # as the Evaluator passes it
    metric.process({}, predictions)
    perfect = metric.compute_metrics(metric.results)
    assert perfect['bbox_mAP'] == pytest.approx(1.0) and perfect['segm_mAP'] == pytest.approx(1.0)
    assert len(metric.results) == len(coco['annotations'])
    # shifted by a quarter of their width, boxes overlap their ground truth by IoU 0.75 / 1.25 = 0.6
    shifted = [dict(r, bbox=[r['bbox'][0] + r['bbox'][2] / 4, *r['bbox'][1:]]) for r in metric.results]
    metric.iou_types = ('bbox',)
    worse = metric.compute_metrics(shifted)
    assert worse['bbox_mAP_50'] == pytest.approx(1.0) and worse['bbox_mAP_75'] == 0.0
    assert 0.2 <= worse['bbox_mAP'] <= 0.3  # matched at IoU thresholds 0.5, 0.55 and (at equality) 0.6
    assert metric.compute_metrics([])['bbox_mAP'] == 0.0


def test_draw_boxes_outlines_each_box_in_its_class_colour():
    image = np.zeros((40, 60, 3), np.uint8)
    out = draw_boxes(image, [[10, 12, 30, 32]], [1], ['background', 'car'], [[0, 0, 0], [255, 0, 0]], scores=[0.9])
    for column in (10, 30):
        assert (out[13:32, column] == [255, 0, 0]).all()
    assert (out[20, 12:29] == 0).all() and (image == 0).all()  # inside untouched; the input is not drawn on
    assert out[:11].any()  # the caption above the box
