"""tools/infer.py --tile H W --overlap N: a real image predicted at its own size in tiles (the config's resize not
applied), the same map as heads.Predictor with the same option."""
import json

import cv2
import infer
import numpy as np
import torch

import heads

from ..reference import sample_street, tiny_dpt


def test_infer_tiles_at_the_image_size(tmp_path):
    image = tmp_path / 'frame.png'  # a real street picture at 320x240: 2 x 2 tiles of 160
    cv2.imwrite(str(image), cv2.resize(cv2.imread(str(sample_street())), (320, 240)))
    model_cfg = tiny_dpt('metric')
    config = tmp_path / 'tiny_depth.py'
    config.write_text(f'model = {json.dumps(model_cfg)}\npredict_scale = (160, 120)\n')
    torch.manual_seed(0)
    torch.save({'state_dict': heads.MODELS.build(model_cfg).state_dict()}, tmp_path / 'tiny.pth')
    infer.main([str(config), str(tmp_path / 'tiny.pth'), str(image), '--out', str(tmp_path / 'out'),
                '--tile', '160', '160', '--overlap', '32'])
    raw = cv2.imread(str(tmp_path / 'out' / 'frame_pred.png'), cv2.IMREAD_UNCHANGED)
    assert raw.shape == (240, 320) and raw.dtype == np.uint16  # the image's own size, millimetres
    predictor = heads.Predictor(str(config), tmp_path / 'tiny.pth', tile=(160, 160), overlap=32)
    depth = predictor(cv2.imread(str(image))[:, :, ::-1].copy())
    assert np.array_equal(raw, np.clip(depth * 1000, 0, 65535).round().astype(np.uint16))
    assert predictor.model.test_cfg['mode'] == 'tile' and predictor.scale is None
