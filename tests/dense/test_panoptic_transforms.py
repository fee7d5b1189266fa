"""mmseg's shortest-edge random resize (its Mask2Former ADE20K recipe), moving the panoptic segment map too; sizes
worked out by hand from detectron2's rule followed by mmcv's keep-ratio rescale."""
from pathlib import Path

import numpy as np
import pytest
from mmengine.config import Config

from heads.transforms import RandomChoiceResize
from heads.transforms.resize import shortest_edge_size


def test_shortest_edge_sizes_by_hand():
    # ADE_val_00000001 is 683x512 (w x h): short edge 512 -> 256 (factor 1/2), long 341.5 -> 342
    assert shortest_edge_size((512, 683), 256, 2048) == (256, 342)
    # 100x1000 to short 512 -> 512x5120, over max 2048: times 0.4 -> 204.8 x 2048 -> 205 x 2048
    assert shortest_edge_size((100, 1000), 512, 2048) == (205, 2048)
    # 2x4 to short 11 -> 11x22, over max 15: times 15/22 -> 7.4999.. x 15 -> (7, 15); the keep-ratio rescale to
    # (w, h) = (15, 7) then takes factor min(15/4, 7/2) = 3.5: 7 x 14
    assert shortest_edge_size((2, 4), 11, 15) == (7, 14)


def test_random_choice_resize_draws_a_scale_and_moves_every_field():
    rng = np.random.default_rng(0)
    results = dict(img=rng.integers(0, 255, (30, 40, 3), dtype=np.uint8),
                   gt_seg_map=rng.integers(0, 3, (30, 40), dtype=np.uint8),
                   gt_segment_map=rng.integers(0, 70000, (30, 40)).astype(np.int32),
                   seg_fields=['gt_seg_map', 'gt_segment_map'])
    transform = RandomChoiceResize(scales=[15, 60], max_size=100)
    np.random.seed(1)
    seen = set()
    for _ in range(8):
        out = transform(dict(results))
        size = out['img'].shape[:2]
        seen.add(size)
        assert out['gt_seg_map'].shape == out['gt_segment_map'].shape == size
        assert out['gt_segment_map'].dtype == np.int32
        assert set(np.unique(out['gt_segment_map'])) <= set(np.unique(results['gt_segment_map']))  # nearest
        assert size == [(15, 20), (60, 80)][out['scale_idx']]
    assert seen == {(15, 20), (60, 80)}
    with pytest.raises(ValueError, match='max_size'):
        RandomChoiceResize(scales=[512])


def test_the_ade20k_mask_head_piece_is_mmsegs_mask2former_pipeline():
    cfg = Config.fromfile(str(Path(__file__).resolve().parents[2] / 'configs/_base_/datasets/ade20k_mask2former.py'))
    resize = cfg.train_dataloader.dataset.pipeline[2]
    assert resize == dict(type='RandomChoiceResize', scales=[256, 307, 358, 409, 460, 512, 563, 614, 665, 716, 768,
                                                             819, 870, 921, 972, 1024],
                          resize_type='ResizeShortestEdge', max_size=2048)
    assert cfg.train_dataloader.dataset.pipeline[3] == dict(type='RandomCrop', crop_size=(512, 512),
                                                           cat_max_ratio=0.75)
    assert cfg.val_evaluator == dict(type='IoUMetric', ignore_index=255)
