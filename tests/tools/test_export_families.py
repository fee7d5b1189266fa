"""ONNX export of every family that exports exactly, at its smallest variant cut to a few blocks: a dynamic batch,
height and width, onnxruntime equal to eager PyTorch (relative error <= 1e-4: max |difference| / max |reference|)
at three sizes other than the traced one, non-square, with batches 1, 3 and 2; and an export that would fix a size
is refused with the reason, no file written."""
import pytest
import torch
from torch import nn

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

import zoo
from heads.export import export_onnx
from heads.export.onnx import onnx_fixed_dims, onnx_session, run_onnx
from zoo.contract import Backbone, Taps

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
}
FAST = {'vit_tiny_patch16_224'}  # the rest in the full suite


from .test_export_onnx import _one_thread  # noqa: E402,F401  (tiny models: one intra-op thread, module-wide)


@pytest.mark.parametrize('name', [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in EXACT])
def test_the_family_exports_with_dynamic_batch_and_size(name, tmp_path):
    torch.manual_seed(0)
    backbone = zoo.create_backbone(name, **EXACT[name]).eval()
    multiple = backbone.input_multiple
    side = multiple * (2 * backbone.coarsest_stride // multiple + 1)  # the coarsest map at least 2 wide
    path = export_onnx(backbone, tmp_path / f'{name}.onnx', example_size=(side, side + multiple))
    assert onnx_fixed_dims(path) == []
    session = onnx_session(path, threads=1)
    for batch, h, w in [(1, side + multiple, side), (3, side, side + 2 * multiple), (2, side + 2 * multiple, side)]:
        x = torch.randn(batch, 3, h, w)
        with torch.no_grad():
            expected = backbone(x)
        got = run_onnx(session, x)
        assert [tuple(g.shape) for g in got] == [tuple(e.shape) for e in expected]
        for g, e in zip(got, expected):
            assert (torch.from_numpy(g) - e).abs().max() <= 1e-4 * e.abs().max(), (name, batch, h, w)


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
