"""The ONNX twins of the task models (heads.export.OnnxTaskModel, OnnxMaskModel) check the inference mode they are
given as the PyTorch models do (heads.models.inference_mode.InferenceMode), when they are made: before, a dense
file opened with test_cfg=dict(mode='slid') ran as 'whole', and mode='slide' without its sizes failed only at
prediction; a mask file took flip=True and ran without it."""
import pytest

import heads
from heads.export.metadata import task_metadata, write_metadata
from heads.models.inference_mode import InferenceModeError

from ..reference import tiny_dpt
from .onnx_files import mask_onnx, plain_onnx

pytest.importorskip('onnxruntime')
pytest.importorskip('onnx')


def test_an_onnx_models_mode_is_checked_when_it_is_made(tmp_path):
    from mmengine.config import Config

    from heads.export import OnnxMaskModel, OnnxTaskModel
    dense_file = plain_onnx(tmp_path / 'dpt.onnx')
    write_metadata(dense_file, task_metadata(heads.MODELS.build(tiny_dpt('seg'))))
    with pytest.raises(InferenceModeError, match=r"dpt.onnx: test_cfg mode must be 'whole', 'slide' or 'tile', got "
                                                 r"'slid' \(did you mean 'slide'\?\)"):
        OnnxTaskModel(dense_file, test_cfg=dict(mode='slid'))
    with pytest.raises(InferenceModeError, match=r"dpt.onnx: test_cfg mode='slide' needs crop_size and stride"):
        OnnxTaskModel(dense_file, test_cfg=dict(mode='slide'))
    with pytest.raises(InferenceModeError, match=r"dpt.onnx: test_cfg crop_size must be \(height, width\), "
                                                 r"multiples of this model's input multiple 32, got \(64, 70\)"):
        OnnxTaskModel(dense_file, test_cfg=dict(mode='slide', crop_size=(64, 70), stride=(32, 32)))
    tiled = OnnxTaskModel(dense_file, test_cfg=dict(mode='tile', crop_size=(64, 64), overlap=16))
    assert tiled.inference_mode.crop_size == (64, 64) and tiled.test_cfg['overlap'] == (16, 16)
    cfg = Config.fromfile('configs/eomt_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=2)
    cfg.update(num_queries=4, num_blocks=1)
    mask_file = mask_onnx(tmp_path / 'eomt.onnx', queries=4, num_classes=11)
    write_metadata(mask_file, task_metadata(heads.MODELS.build(cfg)))
    with pytest.raises(InferenceModeError, match=r"eomt.onnx: test_cfg 'flip' is a setting of dense task models"):
        OnnxMaskModel(mask_file, test_cfg=dict(flip=True))
    with pytest.raises(InferenceModeError, match=r"eomt.onnx: test_cfg mode='slide' needs crop_size and stride"):
        OnnxMaskModel(mask_file, test_cfg=dict(mode='slide'))
