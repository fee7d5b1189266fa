"""tools/infer.py on panoptic mask-classification models (test_cfg tasks=('panoptic',), as
configs/eomt_dinov2_vitl_coco_panoptic_640.py): a random tiny EoMT and Mask2Former (the CamVid CPU configs cut down,
class biases raised so that one thing class has several instances) write COCO's panoptic format, an RGB PNG of
segment ids that panopticapi's ``rgb2id`` reads back to the predicted map (no segment = 0, every instance kept) and
``segments_info`` with the ids, classes, areas and boxes of the segments; any number of instances are drawn."""
import json
from pathlib import Path

import cv2
import infer
import numpy as np
import pytest
import torch
from mmengine.config import Config

import heads
from heads.io.labels import INSTANCE_OFFSET

from ..reference import shared_data

CUT = {'eomt': ('eomt_vitt4_camvid_cpu.py', 'backbone=dict(depth=2), num_queries=8, num_blocks=1'),
       'mask2former': ('mask2former_vitt4_camvid_cpu.py', 'backbone=dict(depth=2), pixel_decoder=dict(num_layers=1), '
                                                          'decoder=dict(num_queries=8, num_layers=1)')}
STUFF = (0, 1, 2, 3)  # CamVid's Sky, Building, Pole, Road as stuff; the other classes (Tree, 5, ...) things
FRAMES = ('0016E5_07959.jpg', '0016E5_07961.jpg')


def rgb2id(color):
    """panopticapi.utils.rgb2id (cocodataset/panopticapi), as it is written there."""
    if isinstance(color, np.ndarray) and len(color.shape) == 3:
        if color.dtype == np.uint8:
            color = color.astype(np.int32)
        return color[:, :, 0] + 256 * color[:, :, 1] + 256 * 256 * color[:, :, 2]
    return int(color[0] + 256 * color[1] + 256 * 256 * color[2])


def tiny_panoptic(root: Path, name: str) -> tuple[Path, Path]:
    """(config, checkpoint) of a random cut-down model predicting panoptic maps only; the class head's biases
    favour class 5 (a thing: its queries become its instances) and class 1 (stuff)."""
    base, cut = CUT[name]
    config = root / f'{name}.py'
    config.write_text(f"_base_ = [{str(Path('configs', base).resolve())!r}]\n"
                      f"model = dict({cut}, test_cfg=dict(tasks=('panoptic',), object_threshold=0.0, "
                      f"overlap_threshold=0.0, stuff_classes={STUFF!r}))\npredict_scale = (64, 48)\n")
    torch.manual_seed(0)
    model = heads.MODELS.build(Config.fromfile(str(config)).model)
    with torch.no_grad():
        head = model.class_head if name == 'eomt' else model.decoder.class_head
        head.bias[5] += 6.0
        head.bias[1] += 5.5
    torch.save({'state_dict': model.state_dict()}, root / f'{name}.pth')
    return config, root / f'{name}.pth'


@pytest.fixture(scope='module')
def frames(tmp_path_factory):
    folder = tmp_path_factory.mktemp('panoptic_frames')
    for name in FRAMES:
        picture = cv2.imread(str(shared_data('camvid', 'images', 'val', name)))
        cv2.imwrite(str(folder / name.replace('.jpg', '.png')), cv2.resize(picture, (64, 48), cv2.INTER_AREA))
    return folder


@pytest.mark.slow  # ~3 s: the model is built twice and runs on two 64x48 frames
@pytest.mark.parametrize('name', ['eomt', 'mask2former'])
def test_panoptic_results_are_written_in_cocos_panoptic_format(name, frames, tmp_path):
    config, checkpoint = tiny_panoptic(tmp_path, name)
    out = tmp_path / 'out'
    written = infer.main([str(config), str(checkpoint), str(frames), '--out', str(out)])  # before: IndexError
    predictor = heads.Predictor(str(config), checkpoint)
    num_classes, annotations = 11, json.loads((out / 'panoptic.json').read_text())
    assert [a['file_name'] for a in annotations['annotations']] == [f'{n[:-4]}_pred.png' for n in FRAMES]
    assert [a['image_id'] for a in annotations['annotations']] == [n[:-4] for n in FRAMES]  # paths under --out
    categories = annotations['categories']
    assert [c['id'] for c in categories] == list(range(num_classes)) and categories[5]['name'] == 'Tree'
    assert [c['isthing'] for c in categories] == [0, 0, 0, 0] + [1] * 7
    instances = 0
    for frame, annotation, picture in zip(sorted(frames.iterdir()), annotations['annotations'], written):
        packed = predictor(frame)
        png = cv2.imread(str(out / f'{frame.stem}_pred.png'), cv2.IMREAD_UNCHANGED)
        assert png.shape == (48, 64, 3) and png.dtype == np.uint8
        ids = rgb2id(png[:, :, ::-1])  # OpenCV reads BGR
        # id = packed value + 1, no segment 0: every instance apart (before: ids >= 1000 clipped to 255, void 11)
        assert np.array_equal(ids, np.where(packed == num_classes, 0, packed + 1))
        assert (packed == num_classes).any() and (ids == 0).any()
        info = json.loads((out / f'{frame.stem}_pred.json').read_text())
        assert info['file_name'] == f'{frame.stem}_pred.png' and info['segments_info'] == annotation['segments_info']
        assert [s['id'] for s in info['segments_info']] == [int(i) for i in np.unique(ids) if i]
        for segment in info['segments_info']:
            mask = ids == segment['id']
            hor, vert = np.nonzero(mask.sum(0))[0], np.nonzero(mask.sum(1))[0]  # as panopticapi's converters
            assert segment == dict(id=segment['id'], category_id=int(packed[mask][0] % INSTANCE_OFFSET), iscrowd=0,
                                   area=int(mask.sum()), bbox=[int(hor[0]), int(vert[0]), int(hor[-1] - hor[0] + 1),
                                                               int(vert[-1] - vert[0] + 1)])
        instances = max(instances, int((packed // INSTANCE_OFFSET).max()) + 1)
        drawn = cv2.imread(str(picture))
        assert drawn.shape[0] == 48 and drawn.shape[1] > 64  # the image and a legend of the classes present
    assert instances >= 2  # a second instance of a thing class (id >= 1005) is present: the case that failed


def test_each_instance_gets_its_own_shade_and_borders_are_dark():
    from heads.visualization.draw import colorize_panoptic
    packed = np.repeat(np.repeat(np.array([[5, 1005, 4005], [5, 1005, 4005], [11, 11, 11]]), 3, 0), 3, 1)
    colours = colorize_panoptic(packed, [[100, 100, 100]] * 11, num_classes=11)
    assert (colours[6:] == 0).all()  # no segment: black
    inside = [tuple(colours[1, c]) for c in (1, 4, 7)]
    assert len(set(inside)) == 3 and inside[0] == (100, 100, 100)  # three instances of class 5, three colours
    assert (colours[1, 2] < colours[1, 1]).all()  # the border with the next instance is darker
