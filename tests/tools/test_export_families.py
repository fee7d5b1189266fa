"""ONNX export of every family and DPT task model that exports exactly, at its smallest variant cut to a few blocks:
a dynamic batch, height and width, onnxruntime equal to eager PyTorch (relative error <= 1e-4: max |difference| /
max |reference|) at three sizes other than the traced one, non-square, with batches 1, 3 and 2; and an export that
would fix a size, or that no dynamic-size graph reproduces (Depth Anything's own 'dinov2' position resampling), is
refused with the reason, no file written."""
import pytest
import torch
from mmengine.config import Config
from torch import nn

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

import heads
import zoo
from heads.export import export_onnx, exportable
from heads.export.onnx import onnx_fixed_dims, onnx_session, run_onnx
from zoo.contract import Backbone, Taps

from ..reference import tiny_dpt

# the ViT-hybrid's BiT ResNet and ViT cut down: one bottleneck a stage, narrow (as tests/layouts/test_dpt_hybrid.py)
HYBRID = dict(layers=(1, 1, 1), channels=(32, 64, 128), stem_chs=16, num_groups=4, embed_dim=64, num_heads=2)
# smallest variant of each family that exports exactly, cut down (each export a few seconds on 2 cores)
EXACT = {
    'vit_tiny_patch16_224': dict(depth=2),
    'deit_tiny_distilled_patch16_224': dict(depth=2),
    'cvt_13_224': dict(depths=(1, 1, 1)),
    'coatnet_0_rw_224': dict(depths=(1, 1, 1, 1)),  # relative-bias tables resampled in the graph
    'levit_128s': dict(depths=(1, 1, 1)),  # offset-magnitude bias resampled in the graph
    'pit_ti_224': dict(depths=(1, 1, 1)),
    'vit_small_patch14_dinov2': dict(depth=2),  # position table resampled in the graph
    'vit_small_patch16_rope_mixed_224': dict(depth=2),  # RoPE angles in the graph
    'vit_base_patch16_clip_224': dict(depth=2, embed_dim=192, num_heads=3),
    'vit_base_patch16_siglip_224': dict(depth=2, embed_dim=192, num_heads=3),
    'vit_small_patch16_dinov3': dict(depth=2),  # DINOv3's RoPE in the graph
    'eva02_tiny_patch14_224': dict(depth=2),
    'vit_pe_core_tiny_patch16_384': dict(depth=2),
    'aimv2_large_patch14_224': dict(depth=2, embed_dim=192, num_heads=3),
    'vit_base_patch16_radio_v3': dict(depth=2, embed_dim=192, num_heads=3),  # the cropped table in the graph
    'vit_tiny_patch16_224+alibi': dict(depth=2, alibi=True, pos_embed='none'),  # ALiBi distances in the graph
    'crossvit_tiny_240': dict(depths=[[1, 1, 0], [1, 1, 0]], out_indices=[0, 0, 1, 1]),  # branch grids rounded
    'vit_base_r50_s16_224': dict(depth=2, **HYBRID),  # BiT 'SAME' padding in the graph
}
FAST = {'vit_tiny_patch16_224'}  # the rest in the full suite
# Swin: traced where every stage has at least two windows a side (a count of 1 would be fixed, see the refusal
# test); checked also where the windows shrink to the map (96x128: stride-32 map 3x4 < 7) and on padded maps
SWIN = {
    'swin_tiny_patch4_window7_224': (dict(depths=(1, 1, 1, 1)), (256, 288)),
    'swinv2_tiny_window8_256': (dict(depths=(1, 1, 1, 1)), (288, 320)),
}
SWIN_CHECKS = [(1, 96, 128), (3, 160, 96), (2, 256, 352)]


from .test_export_onnx import _one_thread  # noqa: E402,F401  (tiny models: one intra-op thread, module-wide)


def check_onnx(model, path, checks):
    """onnxruntime's outputs equal eager PyTorch's (shapes, relative error <= 1e-4) at each (batch, h, w)."""
    module = exportable(model)
    assert onnx_fixed_dims(path) == []
    session = onnx_session(path, threads=1)
    for batch, h, w in checks:
        x = torch.randn(batch, 3, h, w)
        with torch.no_grad():
            expected = module(x)
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        got = run_onnx(session, x)
        assert [tuple(g.shape) for g in got] == [tuple(e.shape) for e in expected]
        for g, e in zip(got, expected):
            assert (torch.from_numpy(g) - e).abs().max() <= 1e-4 * e.abs().max(), (batch, h, w)


def default_sizes(model):
    """(traced size, checks): the smallest traced side with the coarsest map at least 2 wide, and three other
    sizes, non-square, at batches 1, 3 and 2."""
    model = exportable(model).model
    multiple = model.input_multiple
    side = multiple * (2 * model.coarsest_stride // multiple + 1)  # the coarsest map at least 2 wide
    return (side, side + multiple), [(1, side + multiple, side), (3, side, side + 2 * multiple),
                                      (2, side + 2 * multiple, side)]


@pytest.mark.parametrize('name', [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in EXACT])
def test_the_family_exports_with_dynamic_batch_and_size(name, tmp_path):
    torch.manual_seed(0)
    backbone = zoo.create_backbone(name.split('+')[0], **EXACT[name]).eval()
    size, checks = default_sizes(backbone)
    check_onnx(backbone, export_onnx(backbone, tmp_path / f'{name}.onnx', example_size=size), checks)


def depth_anything(**backbone):
    """Depth Anything V2 (the 7-Scenes config's model, its ViT-S/14 encoder shrunk), with backbone overrides."""
    cfg = Config.fromfile('configs/depth_anything_v2_vits_7scenes.py').model
    cfg.backbone.update(depth=3, out_indices=(0, 1, 2), embed_dim=48, num_heads=2, **backbone)
    cfg.neck.update(hidden_channels=(8, 16, 32), reassemble_factors=(4, 2, 1))
    return heads.MODELS.build(cfg)


def dpt_hybrid():
    """The released DPT-Hybrid segmentation model (BatchNorm in the fusion units) with its ResNet and ViT cut down
    to :data:`HYBRID`, two blocks: levels ResNet stages 0 and 1, blocks 0 and 1."""
    from heads.models.dpt_official import dpt_hybrid_config
    cfg = dpt_hybrid_config('ade20k')
    cfg['backbone'].update(depth=2, out_indices=(0, 1, 3, 4), img_size=64, **HYBRID)
    cfg['neck'].update(hidden_channels=(32, 64, 64, 64), fusion_channels=32)
    for head in ('decode_head', 'auxiliary_head'):
        cfg[head].update(num_classes=5, in_channels=32)
    return heads.MODELS.build(cfg)


TASKS = {
    'dpt_segmentation': lambda: heads.MODELS.build(tiny_dpt('seg')),
    'dpt_depth': lambda: heads.MODELS.build(tiny_dpt('metric')),
    'depth_anything_v2': lambda: depth_anything(pos_interp='bicubic'),  # the head's size and strips in the graph
    'dpt_hybrid': dpt_hybrid,  # BiT 'SAME' padding in the graph; stage maps entering the neck as they are
}


@pytest.mark.slow
@pytest.mark.parametrize('name', list(TASKS))
def test_the_task_model_exports_with_dynamic_batch_and_size(name, tmp_path):
    torch.manual_seed(0)
    model = TASKS[name]().eval()
    size, checks = default_sizes(model)
    check_onnx(model, export_onnx(model, tmp_path / f'{name}.onnx', example_size=size), checks)


def test_the_official_dinov2_position_resampling_is_refused_with_the_reason(tmp_path):
    """Depth Anything's own 'dinov2' resampling (scale factors (new + 0.1) / old) has no dynamic-size export."""
    out = tmp_path / 'da.onnx'
    with pytest.raises(ValueError, match="DepthEstimator cannot be exported.*refused.*'dinov2'.*pos_interp='bicubic'"):
        export_onnx(depth_anything().eval(), out, example_size=(42, 56))
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize('name', list(SWIN))
def test_swin_exports_with_dynamic_batch_and_size(name, tmp_path):
    """Window fitting, padding, shift and region mask computed in the graph: exact on maps smaller than the
    window, on window multiples and on padded maps."""
    torch.manual_seed(0)
    options, size = SWIN[name]
    backbone = zoo.create_backbone(name, **options).eval()
    check_onnx(backbone, export_onnx(backbone, tmp_path / f'{name}.onnx', example_size=size), SWIN_CHECKS)


@pytest.mark.slow
def test_a_swin_trace_with_one_window_on_a_side_is_refused(tmp_path):
    backbone = zoo.create_backbone('swin_tiny_patch4_window7_224', depths=(1, 1, 1, 1)).eval()
    out = tmp_path / 'swin.onnx'
    with pytest.raises(ValueError, match='one .* window on a side.*trace at an input size'):
        export_onnx(backbone, out, example_size=(96, 128))
    assert not out.exists()


class PythonSizedBackbone(Backbone):
    """A backbone whose forward computes its map's size in Python (int()): exportable at one size only."""
    out_indices, out_channels, out_strides, input_multiple = (0,), [4], [8], 8

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 8, stride=8)

    def forward_taps(self, x: torch.Tensor) -> Taps:
        h, w = int(x.shape[-2]) // 8, int(x.shape[-1]) // 8
        return Taps([self.conv(x).reshape(x.shape[0], 4, h, w)], None)


def test_an_export_that_would_fix_the_size_is_refused_with_the_reason(tmp_path):
    out = tmp_path / 'fixed.onnx'
    with pytest.raises(ValueError, match='PythonSizedBackbone fixed a dynamic input size.*refused'):
        export_onnx(PythonSizedBackbone().eval(), out, example_size=(32, 48))
    assert not out.exists()
