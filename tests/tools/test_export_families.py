"""ONNX export of every family and task model that exports exactly (DPT, Depth Anything V2, DPT-Hybrid, UperNet,
Mask2Former, EoMT), at its smallest variant cut to a few blocks: a dynamic batch, height and width, onnxruntime
equal to eager PyTorch (relative error <= 1e-4: max |difference| / max |reference|, per output: a mask model's class
and mask logits) at three sizes other than the traced one, non-square, with batches 1, 3 and 2; and an export that
would fix a size, that runs wrong at another size, or that no dynamic-size graph reproduces (Depth Anything's own
'dinov2' position resampling, EoMT's random masking) is refused with the reason, no file written."""
import pytest
import torch
from mmengine.config import Config
from torch import nn

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

import heads
import zoo
from heads.export import export_onnx, exportable
from heads.export.onnx import onnx_fixed_dims, onnx_session, other_size_problem, run_onnx
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
    'vit_intern300m_patch14_448': dict(depth=2, embed_dim=192, num_heads=3),
    # NaFlex (SigLIP 2 / RADIO as variable-resolution ViTs): a learned table resampled, a factorized one, RADIO's
    'naflexvit_base_patch16_siglip': dict(depth=2, embed_dim=192, num_heads=3),
    'naflexvit_base_patch16_parfac_gap': dict(depth=2, embed_dim=192, num_heads=3),
    'naflexvit_base_patch16_radio_v3': dict(depth=2, embed_dim=192, num_heads=3),
    'vit_tiny_patch16_224+alibi': dict(depth=2, alibi=True, pos_embed='none'),  # ALiBi distances in the graph
    'crossvit_tiny_240': dict(depths=[[1, 1, 0], [1, 1, 0]], out_indices=[0, 0, 1, 1]),  # branch grids rounded
    'vit_base_r50_s16_224': dict(depth=2, **HYBRID),  # BiT 'SAME' padding in the graph
}
FAST = {'vit_tiny_patch16_224'}  # the rest in the full suite
# Swin: traced where every stage has at least two windows a side (a count of 1 would be fixed, see the refusal
# test); checked also where the windows shrink to the map (96x128: stride-32 map 3x4 < 7) and on padded maps. Swin-T
# keeps two blocks a stage (the second shifts its windows and builds the region mask) and is traced square: a graph
# must not depend on the trace being square (test_export_every_family's square test, whose Swin case this is)
SWIN = {
    'swin_tiny_patch4_window7_224': (dict(depths=(2, 2, 2, 2)), (288, 288)),
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


def upernet():
    """The UperNet CPU config's model (ViT-Ti -> simple feature pyramid -> UPerHead + FCN auxiliary head), the ViT
    cut to two blocks, levels and heads 16 and 8 wide: pooling to 1, 2, 3 and 6 cells of a stride-32 map of any
    size (the traced one 3x4)."""
    cfg = Config.fromfile('configs/upernet_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=2, out_indices=(0, 1))
    cfg.neck.update(out_channels=16)
    cfg.decode_head.update(channels=16)
    cfg.auxiliary_head.update(channels=8)
    return heads.MODELS.build(cfg)


def mask2former():
    """The Mask2Former CPU config's model, the ViT cut to two blocks, a 32-wide pixel decoder with one deformable
    layer (grid_sample over strides 8, 16, 32) and a 32-wide masked-attention decoder with 8 queries, 3 layers."""
    cfg = Config.fromfile('configs/mask2former_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=2)
    cfg.pixel_decoder.update(channels=32, mask_channels=16, num_layers=1, num_heads=2, ffn_channels=32)
    cfg.decoder.update(channels=32, mask_channels=16, num_queries=8, num_layers=3, num_heads=2, ffn_channels=32)
    return heads.MODELS.build(cfg)


def eomt(probs=(0.0, 0.0)):
    """The EoMT CPU config's model, the ViT cut to three blocks, 8 queries joining before the last two; ``probs``
    the masked attention's probabilities (0: annealed, plain attention as after training; 1: masked)."""
    cfg = Config.fromfile('configs/eomt_vitt4_camvid_cpu.py').model
    cfg.backbone.update(depth=3)
    cfg.update(num_queries=8, num_blocks=2)
    model = heads.MODELS.build(cfg)
    model.set_mask_probabilities(list(probs))
    return model


TASKS = {
    'dpt_segmentation': lambda: heads.MODELS.build(tiny_dpt('seg')),
    'dpt_depth': lambda: heads.MODELS.build(tiny_dpt('metric')),
    'depth_anything_v2': lambda: depth_anything(pos_interp='bicubic'),  # the head's size and strips in the graph
    'dpt_hybrid': dpt_hybrid,  # BiT 'SAME' padding in the graph; stage maps entering the neck as they are
    'upernet': upernet,  # adaptive pooling's bins in the graph; resized back without a guard on the size
    'mask2former': mask2former,  # deformable attention's grid_sample, masked attention's thresholds in the graph
    'eomt': eomt,  # annealed: plain attention
    'eomt_masked': lambda: eomt((1.0, 1.0)),  # masked attention, its masks resized to the patch grid in the graph
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


def test_eomts_random_masking_is_refused_with_the_reason(tmp_path):
    """Probabilities between 0 and 1 mask each query at random in evaluation too: no graph reproduces the draws."""
    out = tmp_path / 'eomt.onnx'
    with pytest.raises(ValueError, match=r"EoMT cannot be exported.*refused.*at random.*probabilities 0"):
        export_onnx(eomt((0.5, 0.0)).eval(), out, example_size=(48, 64))
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
    """Refused before tracing, naming the size to trace at (heads.export.sizes.trace_side)."""
    backbone = zoo.create_backbone('swin_tiny_patch4_window7_224', depths=(1, 1, 1, 1)).eval()
    out = tmp_path / 'swin.onnx'
    with pytest.raises(ValueError, match=r'96x128 is below the smallest side 256 .* window.*trace at e.g. 256x288'):
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


class ConvBackbone(Backbone):
    """One stride-8 conv: the smallest backbone that exports."""
    out_indices, out_channels, out_strides, input_multiple = (0,), [4], [8], 8

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 8, stride=8)

    def forward_taps(self, x: torch.Tensor) -> Taps:
        return Taps([self.conv(x)], None)


@pytest.mark.slow
def test_the_second_size_check_finds_a_graph_that_differs_from_pytorch(tmp_path):
    """export_onnx runs onnxruntime at a second size (batch 1, one multiple taller) against PyTorch: the file of
    one model checked against another with other weights differs, against its own it does not."""
    from heads.export import export_program
    torch.manual_seed(0)
    model, other = ConvBackbone().eval(), ConvBackbone().eval()
    program = export_program(model, (32, 40))
    path = export_onnx(model, tmp_path / 'conv.onnx', program=program)
    assert other_size_problem(path, exportable(model), program) is None
    assert 'at 1x3x40x40 output stride8 differs by' in other_size_problem(path, exportable(other), program)


def test_an_export_that_would_fix_the_size_is_refused_with_the_reason(tmp_path):
    out = tmp_path / 'fixed.onnx'
    with pytest.raises(ValueError, match='PythonSizedBackbone fixed a dynamic input size.*refused'):
        export_onnx(PythonSizedBackbone().eval(), out, example_size=(32, 48))
    assert not out.exists()


@pytest.mark.slow
def test_a_levit_program_traced_at_a_square_size_runs_at_non_square_sizes():
    """Traced at 256x256 (the square trace once folded sizes in: the downsampling's query grid written as
    -(-h // 2), which torch.export could not prove equal to the strided slice's size, and the bias table's
    resampling skipped where the last stage's grid equalled its build grid 4x4, fixing it), the program runs as
    eager PyTorch at non-square sizes, batch 1."""
    from heads.export import export_program
    torch.manual_seed(0)
    backbone = zoo.create_backbone('levit_128s', depths=(1, 1, 1)).eval()
    program = export_program(backbone, (256, 256))
    for h, w in ((512, 256), (256, 320)):
        x = torch.randn(1, 3, h, w)
        with torch.no_grad():
            expected = exportable(backbone)(x)
        got = program.module()(x)
        assert [tuple(g.shape) for g in got] == [tuple(e.shape) for e in expected]
        for g, e in zip(got, expected):
            assert (g - e).abs().max() <= 1e-4 * e.abs().max(), (h, w)
