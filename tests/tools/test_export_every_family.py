"""tools/export_model.py on every registered family at full depth: ``--backbone NAME --format onnx`` without a size
exports the family's smallest variant (traced at the size the tool picks for the model: non-square, for Swin every
stage's map wider than its window), checked by onnxruntime against PyTorch at a second, non-square size; the
families that compute sizes of their own are traced at a square size too (every stage, its blocks cut to the fewest
that take every path); a size the model cannot be traced at is refused in one line naming one to use.

Full depth is slow: wall-clock on a shared 2-core machine (load ~9), default size: Swin-T 12 min, CoAtNet-0 7 min,
CrossViT-Ti 2.7 min, the others 15-105 s each. Square, the cut models (one process, one thread, 2-core
AVX-512 EPYC, load ~1, 2026-12-05): CoAtNet 25 s (62 at full depth), CrossViT 50 (57), LeViT 23 (36), CvT 15
(34), PiT 15 (24); Swin's square trace is test_export_families.py's Swin-T case."""
import pytest
import torch

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

import zoo
from heads.export.onnx import onnx_fixed_dims
from heads.export.sizes import trace_size

from .test_export_onnx import _one_thread  # noqa: F401  (module-wide: one intra-op thread)

# family (tools/list_models.py's column: the module of the backbone class) -> its smallest variant by backbone
# parameters (test_the_smallest_variants_are_the_registrys checks both against the registry)
SMALLEST = {
    'coatnet': 'coatnet_0_224',
    'crossvit': 'crossvit_tiny_240',
    'cvt': 'cvt_13_224',
    'deit': 'deit_tiny_distilled_patch16_224',
    'dinov2': 'vit_small_patch14_dinov2',
    'dinov3': 'vit_tiny_patch16_dinov3_qkvb',
    'levit': 'levit_128s',
    'naflex': 'naflexvit_base_patch16_parfac_gap',
    'pit': 'pit_ti_224',
    'swin': 'swin_tiny_patch4_window7_224',
    'vit': 'eva02_tiny_patch14_224',
    'vit_hybrid': 'vit_base_r50_s16_224',
}


@pytest.mark.slow
def test_the_smallest_variants_are_the_registrys():
    import io
    from contextlib import redirect_stdout

    from list_models import main as list_models
    with redirect_stdout(io.StringIO()):
        rows = list_models([])
    smallest = {}
    for row in rows:
        if row['family'] not in smallest or row['backbone_params_M'] < smallest[row['family']]['backbone_params_M']:
            smallest[row['family']] = row
    assert {family: row['name'] for family, row in smallest.items()} == SMALLEST


def export_with_the_tool(name, tmp_path, capsys, size=None, kwargs=None):
    """tools/export_model.py in-process: ``--backbone name`` (``--size`` if given, ``--backbone-kwargs`` if
    ``kwargs``), checked at a non-square size other than the traced one and the export's own second size; returns
    (traced size, check size)."""
    import json

    from export_model import main

    from heads.detection import PyramidBackbone
    from heads.export import required_multiple
    torch.manual_seed(0)
    model = PyramidBackbone(name, **(kwargs or {})).eval()
    multiple = required_multiple(model)
    traced = size or trace_size(model, multiple)
    check = (traced[0] + multiple, traced[0])  # taller than wide
    del model
    out = tmp_path / f'{name}.onnx'
    argv = ['--backbone', name, '--format', 'onnx', '--out', str(out), '--check', str(check[0]), str(check[1])]
    argv += ['--size', *map(str, size)] if size else []
    argv += ['--backbone-kwargs', json.dumps(kwargs)] if kwargs else []
    assert main(argv) == 0  # 0: max abs diff <= 1e-3
    printed = capsys.readouterr().out
    assert f'tracing with torch.export at {traced[0]}x{traced[1]}' in printed
    assert f'check {check[0]}x{check[1]}: max abs diff' in printed
    assert onnx_fixed_dims(out) == []
    return traced, check


@pytest.mark.slow
@pytest.mark.parametrize('family', list(SMALLEST))
def test_the_tool_exports_the_smallest_variant_of_every_family_at_its_default_size(family, tmp_path, capsys):
    traced, _ = export_with_the_tool(SMALLEST[family], tmp_path, capsys)
    assert traced[0] != traced[1]


# families whose graphs compute sizes of their own (strided grids, windows, pooled stages, branch grids), traced at
# a square size too: a graph must not depend on the trace being square. Those sizes are computed once a stage (its
# downsampling, windows, pooling, branch grids), never once a block, so every stage is kept at its fewest blocks
# that take every path: one. The default-size test above exports each at full depth (at full depth the six took 8 min
# on an AVX-512 EPYC). Swin's square trace (two blocks a stage: its odd blocks shift the windows and build the region
# mask) is tests/tools/test_export_families.py's Swin-T case, checked there at three non-square sizes.
SQUARE = {
    'coatnet': {'depths': [1, 1, 1, 1]},
    'crossvit': {'depths': [[1, 1, 0]] * 3},
    'cvt': {'depths': [1, 1, 1]},
    'levit': {'depths': [1, 1, 1]},
    'pit': {'depths': [1, 1, 1]},
}


@pytest.mark.slow
@pytest.mark.parametrize('family', list(SQUARE))
def test_the_smallest_variant_traced_at_a_square_size_runs_at_non_square_sizes(family, tmp_path, capsys):
    from heads.detection import PyramidBackbone
    model = PyramidBackbone(SMALLEST[family], **SQUARE[family]).eval()
    side = trace_size(model)[1]
    del model
    export_with_the_tool(SMALLEST[family], tmp_path, capsys, size=(side, side), kwargs=SQUARE[family])


def test_a_size_swin_cannot_be_traced_at_is_refused_in_one_line_naming_one(tmp_path, capsys):
    from export_model import main
    out = tmp_path / 'swin.onnx'
    with pytest.raises(SystemExit):
        main(['--backbone', 'swin_tiny_patch4_window7_224', '--backbone-kwargs', '{"depths": [1, 1, 1, 1]}',
              '--size', '224', '224', '--out', str(out)])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(': error: input size 224x224 is below the smallest side 256 an export of this model traces '
                          'at (every window-attention map must be wider than its window, or the trace fixes the count '
                          'of windows); trace at e.g. 256x288')
    assert not out.exists()


def test_the_trace_size_has_every_swin_stage_wider_than_its_window():
    """Swin-T (window 7, stride 32): 256x288, its last map 8x9; Swin V2-T (window 8): 288x320; no window: the
    smallest side, one multiple wider (ViT/16: 32x48)."""
    for name, size in [('swin_tiny_patch4_window7_224', (256, 288)), ('swinv2_tiny_window8_256', (288, 320)),
                       ('vit_tiny_patch16_224', (32, 48))]:
        with torch.device('cpu'):
            model = zoo.create_backbone(name, **({'depth': 1} if 'vit' in name else {'depths': (1, 1, 1, 1)}))
        assert trace_size(model.eval()) == size, name
