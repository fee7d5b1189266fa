"""One inference mode (heads.models.inference_mode.InferenceMode) for every task model: a ``test_cfg`` that would
run wrong (an unknown key or a flag that is not a bool silently ignored or misread, a mask model's flip ignored) or
fail only at prediction (slide without its sizes, an overlap as large as the tile, an unknown ramp, windows further
apart than they are wide) is refused when the model is built, naming the key and how to fix it; a mode reads back
from its plain test_cfg unchanged, and ``--tile`` goes through the same check."""
import infer
import pytest
import torch

import heads
from heads.models.inference_mode import InferenceMode, InferenceModeError, tiled_cfg

from ..reference import tiny_dpt
from .test_mask_inference import TinyMaskModel

# test_cfg -> what the refusal says; before, each was built: the first ones failed only at predict time, the
# others ran wrong (an unknown key and flip='no' ignored or read as true, windows leaving pixels without prediction)
DENSE_REFUSED = {
    'slide without stride': (dict(mode='slide', crop_size=(64, 64)),
                             r"Segmentor: test_cfg mode='slide' needs stride, e.g. test_cfg=dict\(mode='slide', "
                             r"crop_size=\(128, 128\), stride=\(96, 96\)\)"),
    'overlap of a whole tile': (dict(mode='tile', crop_size=(64, 64), overlap=64),
                                r"test_cfg overlap must be .* in \[0, the crop_size \(64, 64\)\), got 64"),
    'unknown ramp': (dict(mode='tile', crop_size=(64, 64), overlap=16, ramp='cubic'),
                     r"test_cfg ramp must be 'linear' or 'cosine', got 'cubic'"),
    'unknown key': (dict(mode='slide', crop=(64, 64), stride=(32, 32)),
                    r"test_cfg has an unknown key 'crop' \(did you mean 'crop_size'\?\)"),
    'flip a string': (dict(flip='no'), r"test_cfg flip must be True or False, got 'no' \(str\)"),
    'stride above the crop': (dict(mode='slide', crop_size=(64, 64), stride=(96, 32)),
                              r"test_cfg stride \(96, 32\) must not exceed crop_size \(64, 64\)"),
    'unknown mode': (dict(mode='slid'), r"test_cfg mode must be 'whole', 'slide' or 'tile', got 'slid' "
                                        r"\(did you mean 'slide'\?\)"),
}


@pytest.mark.parametrize('case', list(DENSE_REFUSED))
def test_a_dense_model_refuses_a_wrong_mode_when_built(case):
    test_cfg, match = DENSE_REFUSED[case]
    with pytest.raises(InferenceModeError, match=match):
        heads.MODELS.build(tiny_dpt('seg', test_cfg=test_cfg))


def test_a_mask_model_refuses_a_dense_setting_and_an_unknown_key_when_built():
    """Before: flip=True (tools/test.py --tta) and a misspelt threshold were ignored."""
    with pytest.raises(InferenceModeError, match=r"TinyMaskModel: test_cfg 'flip' is a setting of dense task models "
                                                 r"\(Segmentor, DepthEstimator\), not of mask-classification models"):
        TinyMaskModel(test_cfg=dict(flip=True))
    with pytest.raises(InferenceModeError, match=r"unknown key 'mask_treshold' \(did you mean 'mask_threshold'\?\)"):
        TinyMaskModel(test_cfg=dict(tasks=('panoptic',), mask_treshold=0.4))
    with pytest.raises(InferenceModeError, match=r"test_cfg stuff_classes must be a list of class indices in "
                                                 r"\[0, num_classes 5\), got \[7\]"):
        TinyMaskModel(test_cfg=dict(tasks=('panoptic',), stuff_classes=[7]))


def test_a_mode_reads_back_from_its_plain_test_cfg():
    for family, cfg in [('dense', dict(mode='tile', crop_size=[64, 96], overlap=16, ramp='cosine', flip=True)),
                        ('dense', dict(mode='slide', crop_size=(64, 64), stride=(32, 48), padding='crop')),
                        ('mask', dict(tasks='panoptic', stuff_classes=[1, 2], object_threshold=0.5, top_k=3))]:
        mode = InferenceMode.from_cfg(cfg, family, input_multiple=32, num_classes=5)
        assert InferenceMode.from_cfg(mode.as_cfg(), family, input_multiple=32, num_classes=5) == mode
    mode = InferenceMode.from_cfg(dict(mode='tile', crop_size=[64, 96], overlap=16), input_multiple=32)
    assert mode.crop_size == (64, 96) and mode.overlap == (16, 16) and mode.ramp == 'linear'
    with pytest.raises(AttributeError):
        mode.mode = 'whole'  # frozen: checked once, then unchanged


def test_relative_is_the_models_own_attribute_and_aligns_tiles():
    """Tiles of a relative depth model are aligned by scale and shift: the attribute the base class declares."""
    tile = dict(mode='tile', crop_size=(64, 64), overlap=16)
    relative = heads.MODELS.build(tiny_dpt('relative', test_cfg=tile)).eval()
    metric = heads.MODELS.build(tiny_dpt('metric', test_cfg=tile)).eval()
    assert relative.relative and not metric.relative and not heads.models.Segmentor.relative
    metric.load_state_dict(relative.state_dict(), strict=False)  # the same network, aligned or plain blend
    x = torch.randn(1, 3, 64, 160)
    with torch.no_grad():
        assert not torch.allclose(relative.inference(x), metric.inference(x))


def test_predictor_and_infer_tile_options_go_through_the_same_check(tmp_path):
    assert tiled_cfg(dict(flip=True), [64, 96], 16) == dict(flip=True, mode='tile', crop_size=(64, 96), overlap=16)
    with pytest.raises(InferenceModeError, match=r"multiples of this model's input multiple 32, got \(64, 70\): "
                                                 r"use e.g. crop_size=\(64, 96\)"):
        heads.Predictor(dict(model=tiny_dpt('metric')), tile=(64, 70), overlap=16)
    config = tmp_path / 'tiny.py'
    config.write_text(f'model = {tiny_dpt("metric")!r}\n')
    with pytest.raises(InferenceModeError, match=r"--tile 64 64 --overlap 64 \(test_cfg mode='tile', crop_size, "
                                                 r"overlap\) is refused: DepthEstimator: test_cfg overlap must be"):
        infer.main([str(config), str(tmp_path / 'none.pth'), str(config), '--out', str(tmp_path / 'out'),
                    '--tile', '64', '64', '--overlap', '64'])


def test_a_mask_models_slide_windows_are_multiples_of_its_input_multiple():
    """Before: EoMT built with 40 x 40 windows on 16-pixel patches and failed at the first prediction."""
    from mmengine.config import Config
    cfg = Config.fromfile('configs/eomt_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=2)
    cfg.update(num_queries=4, num_blocks=1, test_cfg=dict(mode='slide', crop_size=(40, 40), stride=(32, 32)))
    with pytest.raises(InferenceModeError, match=r"EoMT: test_cfg crop_size must be \(height, width\), multiples of "
                                                 r"this model's input multiple 16, got \(40, 40\): use e.g. "
                                                 r"crop_size=\(48, 48\)"):
        heads.MODELS.build(cfg)
    cfg.test_cfg.update(crop_size=(48, 48))
    assert heads.MODELS.build(cfg).inference_mode.crop_size == (48, 48)


@pytest.mark.slow
def test_tools_test_tta_on_a_mask_model_is_refused_naming_the_option(tmp_path):
    """Before: tools/test.py --tta set test_cfg flip=True on an EoMT, which ignored it and reported untransformed
    metrics as the flip TTA's."""
    import test as test_tool
    with pytest.raises(InferenceModeError, match=r"--tta mirrors the predictions through test_cfg flip=True, which "
                                                 r"this model does not take \(EoMT: test_cfg 'flip' is a setting of "
                                                 r"dense task models .*\); run without --tta"):
        test_tool.main(['configs/eomt_vitt4_camvid_cpu.py', str(tmp_path / 'none.pth'), '--tta', '--work-dir',
                        str(tmp_path / 'work')])
