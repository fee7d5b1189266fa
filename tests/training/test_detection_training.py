"""Must-show of detection export: the torchvision Faster R-CNN on a zoo backbone (CvT-13 with one block per stage,
from scratch, with an FPN) trains through mmengine on CamVid's cars and pedestrians (COCO format, built from the
label maps): its losses fall (RPN objectness to under half) and pycocotools' box AP on the 101 validation images
rises with training and beats a detector that knows the box sizes but not where anything is many times over."""
from pathlib import Path

import cv2
import numpy as np
import pytest

from heads.engine.console.logs import read_scalars

from ..reference import shared_data

ROOT = Path(__file__).resolve().parents[2]
import make_camvid_detection  # noqa: E402
import train as train_tool  # noqa: E402

pytestmark = pytest.mark.slow  # every test here trains (the fast lane: -m "not slow")

ITERS = 360  # the learning rate decaying to 0 at ITERS; validated every ITERS / 3. On an AVX2 EPYC (2026-12-04,
# one thread, another test beside): box AP 0 / 1e-4 / 0.0023 at 120 / 240 / 360 in 4 min; 600 gave 5e-5 / 0.0012 /
# 0.0021 at 200 / 400 / 600 in 8.4 min. Box AP that low is compared with chance (chance_box_ap), not with zero


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def chance_box_ap(data: Path, seed: int = 0) -> dict:
    """COCO box AP of a detector that knows the training set's box sizes and classes but not where anything is: on
    every validation image 100 boxes of sizes drawn from the training boxes, placed uniformly, with random classes
    and scores. A trained detector must beat it; box AP above zero alone (0.0023 after 360 iterations) does not say
    that the detector found anything."""
    import json

    import numpy as np

    from heads.datasets.coco import load_coco
    from heads.evaluation.coco import coco_average_precision
    rng = np.random.default_rng(seed)
    train = json.loads((data / 'annotations' / 'instances_train.json').read_text())
    sizes = np.array([a['bbox'][2:] for a in train['annotations']])
    labels = np.array([a['category_id'] for a in train['annotations']])
    ground_truth = load_coco(str(data / 'annotations' / 'instances_val.json'))
    results = []
    for image in ground_truth.dataset['images']:
        picks = rng.integers(len(sizes), size=100)
        for (w, h), label, score in zip(sizes[picks], labels[picks], rng.random(100)):
            x, y = rng.uniform(0, image['width'] - w), rng.uniform(0, image['height'] - h)
            results.append({'image_id': image['id'], 'category_id': int(label), 'score': float(score),
                            'bbox': [float(x), float(y), float(w), float(h)]})
    return coco_average_precision(ground_truth, results, 'bbox')


def test_faster_rcnn_beats_chance_and_its_losses_fall_on_camvid(tmp_path):
    data = tmp_path / 'camvid_det'
    make_camvid_detection.main([str(shared_data('camvid')), str(data)])
    work_dir = tmp_path / 'work'
    train_tool.main(['configs/frcnn_cvt13_camvid_det.py', '--data-root', str(data), '--work-dir', str(work_dir),
                     '--cfg-options', f'train_cfg.max_iters={ITERS}', f'param_scheduler.1.end={ITERS}',
                     f'train_cfg.val_interval={ITERS // 3}', f'default_hooks.checkpoint.interval={ITERS}'])
    scalars = read_scalars(work_dir)
    box_ap = scalars['val']['coco/bbox_mAP']
    chance = chance_box_ap(data)
    print('COCO box AP by iteration:', box_ap, 'AP50:', scalars['val']['coco/bbox_mAP_50'], 'chance:', chance)

    def fifths(key):  # mean of a training loss over the first and the last fifth of its logged steps
        series = scalars['train'][key]
        steps = sorted(series)
        n = max(1, len(steps) // 5)
        return np.mean([series[s] for s in steps[:n]]), np.mean([series[s] for s in steps[-n:]])
    print({key: fifths(key) for key in scalars['train'] if key.startswith('loss')})
    # 2026-12-05, a busy AVX2 EPYC: loss 1.49 -> 0.91, RPN objectness 0.59 -> 0.15; box AP 0.0016 (AP50 0.0064)
    # against chance 1.2e-5 (4.8e-5) at the last validation. 2026-12-06, the AMX Xeon (the same code, and the code
    # before issue 53's refactoring alike): the same losses (1.49 -> 0.90, 0.60 -> 0.17), but box AP 0 at the last
    # validation, AP50 1.9e-3 at 240 (two workers of one thread, as CI runs) or 7.1e-4 (one process of two threads):
    # from scratch in 360 steps the detector is just above chance and its last validation can fall back to none
    # found. So the bar is the run's best validation: a detector whose head or training is broken stays at chance
    # in every one.
    total, objectness = fifths('loss'), fifths('loss_objectness')
    assert total[1] < 0.8 * total[0] and objectness[1] < 0.5 * objectness[0], (total, objectness)
    assert max(scalars['val']['coco/bbox_mAP_50'].values()) > 10 * chance['bbox_mAP_50'], chance
    assert max(box_ap.values()) > 3 * chance['bbox_mAP'], chance
    steps = sorted(box_ap)
    assert steps == [ITERS // 3, 2 * ITERS // 3, ITERS]
    best = max(steps, key=box_ap.get)
    assert best != steps[0] and box_ap[best] > box_ap[steps[0]]  # it improves after the first validation
    assert scalars['val']['coco/bbox_mAP_50'][best] > box_ap[best]  # the looser threshold scores higher
    grid = cv2.imread(str(work_dir / 'predictions.png'))  # image | ground-truth boxes | detections, per row
    assert grid.shape[0] > 4 * 360 and grid.shape[1] > 3 * 480
