"""heads.export: torch.export programs and ONNX files with a dynamic input height and width, checked against eager
PyTorch (and onnxruntime) at sizes other than the traced one; tools/export_model.py."""
import math
from pathlib import Path

import pytest
import torch

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

import heads
from heads.detection import PyramidBackbone
from heads.export import (
    check_size,
    compare_onnx,
    export_onnx,
    export_program,
    exportable,
    min_side,
    onnx_session,
    required_multiple,
    run_onnx,
)
from heads.export.compare import relative_diffs

from ..reference import tiny_dpt


@pytest.fixture(scope='module', autouse=True)
def _one_thread():
    """Tiny models: one intra-op thread is faster, and far faster when the cores are shared with other jobs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def vit_pyramid():
    return PyramidBackbone('vit_tiny_patch16_224', depth=2, out_channels=32)


def cvt_pyramid():
    return PyramidBackbone('cvt_13_224', depths=(1, 1, 1), out_channels=32)


def dpt_segmentor():
    return heads.MODELS.build(tiny_dpt('seg'))


# builder, (multiple, smallest side), traced size, two other sizes checked
CASES = {
    'vit_pyramid': (vit_pyramid, (32, 96), (96, 128), [(128, 96), (96, 160)]),
    'cvt_pyramid': (cvt_pyramid, (16, 48), (64, 96), [(96, 128), (128, 64)]),
    'dpt_segmentor': (dpt_segmentor, (32, 64), (64, 96), [(96, 128), (128, 64)]),
}


@pytest.fixture(scope='module')
def exported():
    """name -> (model in eval mode, its program traced at the case's size): one trace per case and module."""
    cache = {}

    def get(name):
        if name not in cache:
            build, _, size, _ = CASES[name]
            torch.manual_seed(0)
            model = build().eval()
            cache[name] = model, export_program(model, size)
        return cache[name]
    return get


def expected_shapes(name, model, size):
    h, w = size
    if name == 'dpt_segmentor':
        return [(h, w)]
    return [(math.ceil(h / s), math.ceil(w / s)) for s in model.out_strides]


def as_list(out):
    return [out] if isinstance(out, torch.Tensor) else list(out)


def test_required_multiple_and_smallest_side():
    for name, (build, (multiple, smallest), _, _) in CASES.items():
        model = build()
        assert (required_multiple(model), min_side(model)) == (multiple, smallest), name


@pytest.mark.slow
@pytest.mark.parametrize('name', list(CASES))
def test_program_follows_input_size(exported, name):
    model, program = exported(name)
    module, traced = exportable(model), program.module()
    for size in CASES[name][3]:
        x = torch.randn(1, 3, *size)
        with torch.no_grad():
            expected, got = as_list(module(x)), as_list(traced(x))
        assert [tuple(o.shape[-2:]) for o in got] == expected_shapes(name, model, size)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e, atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize('name', ['cvt_pyramid', 'dpt_segmentor'])  # the ViT pyramid's: the CLI test
def test_onnx_matches_pytorch_at_other_sizes(exported, name, tmp_path):
    model, program = exported(name)
    path = export_onnx(model, tmp_path / f'{name}.onnx', program=program)
    sizes = CASES[name][3]
    diffs = compare_onnx(path, model, sizes, threads=1)
    assert set(diffs) == set(sizes) and max(diffs.values()) <= 1e-3, diffs
    # what docs/detection.md calls exact: max |difference| / max |PyTorch's| <= 1e-4 per output (an absolute 1e-3
    # passed outputs of scale 1 wrong in their fourth digit)
    session = onnx_session(path, 1)
    relative = relative_diffs(model, lambda x: run_onnx(session, x), sizes)
    assert set(relative) == set(sizes) and max(max(errors) for errors in relative.values()) <= 1e-4, relative
    outputs = run_onnx(path, torch.randn(1, 3, *sizes[0]))
    assert [o.shape[-2:] for o in outputs] == expected_shapes(name, model, sizes[0])


def test_sizes_that_are_not_multiples_are_refused():
    model = vit_pyramid()
    with pytest.raises(ValueError, match=r'100x128 is not a multiple of 32'):
        export_program(model, (100, 128))
    with pytest.raises(ValueError, match=r'64x96 is below the smallest side 96'):
        export_program(model, (64, 96))
    with pytest.raises(ValueError, match=r'is not a multiple of 32'):
        export_program(model, (96, 128), multiple=48)
    with pytest.raises(ValueError, match=r'96x80 is not a multiple of 32'):
        compare_onnx('unused.onnx', model, [(96, 80)])
    assert check_size((64, 96), 32) == (64, 96)


@pytest.mark.slow
def test_cli_writes_onnx_and_checks_it(tmp_path, capsys):
    """The ViT pyramid's ONNX export, through the CLI: checked at two sizes other than the traced one."""
    from export_model import main
    out = tmp_path / 'vit_pyramid.onnx'
    kwargs = '{"depth": 2, "out_channels": 32}'
    argv = ['--backbone', 'vit_tiny_patch16_224', '--backbone-kwargs', kwargs, '--size', '96', '128',
            '--check', '128', '64', '--check', '96', '160', '--out', str(out)]
    assert main(argv) == 0  # 0: every max abs diff <= 1e-3
    printed = capsys.readouterr().out
    assert 'multiples of 32' in printed and 'check 128x64: max abs diff' in printed and 'check 96x160' in printed
    assert 'converting to ONNX' in printed and printed.count('  done in ') == 4  # each long step reports its end
    assert [o.shape[-2:] for o in run_onnx(out, torch.randn(1, 3, 128, 64))] == \
        expected_shapes('vit_pyramid', vit_pyramid(), (128, 64))
    with pytest.raises(SystemExit):
        main(['--backbone', 'vit_tiny_patch16_224', '--size', '100', '128', '--out', str(out)])
    assert 'not a multiple of 32' in capsys.readouterr().err


@pytest.mark.slow
def test_cli_writes_a_mask_models_two_outputs(tmp_path, capsys):
    """A config's EoMT (its ViT cut to two blocks, 4 queries) through the CLI: outputs 'class_logits' 'b q c+1' and
    'mask_logits' 'b q h/4 w/4', checked at another size; the file's metadata names the task."""
    from export_model import main

    from heads.export import read_metadata
    cfg = tmp_path / 'eomt_tiny.py'
    base = Path('configs/eomt_vitt4_camvid_cpu.py').resolve()
    cfg.write_text(f"_base_ = [{str(base)!r}]\nmodel = dict(backbone=dict(depth=2), num_queries=4, num_blocks=1)\n")
    out = tmp_path / 'eomt.onnx'
    assert main(['--config', str(cfg), '--check', '64', '96', '--out', str(out)]) == 0
    assert 'check 64x96: max abs diff' in capsys.readouterr().out
    session = onnx_session(out, threads=1)
    assert [o.name for o in session.get_outputs()] == ['class_logits', 'mask_logits']
    assert [o.shape for o in run_onnx(session, torch.randn(3, 3, 48, 80))] == [(3, 4, 12), (3, 4, 12, 20)]
    assert read_metadata(out)['task'] == 'MaskClassifier'


def test_a_long_step_reports_while_it_runs_and_when_it_fails():
    import io
    import time

    from lab.cli import stage
    out = io.StringIO()
    with stage('converting', every=0.05, out=out):
        time.sleep(0.18)
    lines = out.getvalue().splitlines()
    assert lines[0] == 'converting...' and lines[-1].startswith('  done in 0.')
    assert len([line for line in lines if line.startswith('  still converting: ')]) >= 2
    out = io.StringIO()
    with pytest.raises(RuntimeError), stage('tracing', out=out):
        raise RuntimeError('boom')
    assert out.getvalue().splitlines()[-1].startswith('  failed after ')


def test_a_dimension_named_by_a_number_counts_as_fixed(tmp_path):
    """The dynamo translator names an input dimension the program specialised by its value ('28'): fixed, as a
    plain number is (a Video Depth Anything trace whose coarsest map was one row did this)."""
    import onnx
    from onnx import TensorProto, helper

    from heads.export.onnx import onnx_fixed_dims
    image = helper.make_tensor_value_info('image', TensorProto.FLOAT, ['s0', 3, '28', '14*s1'])
    depth = helper.make_tensor_value_info('depth', TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node('Identity', ['image'], ['depth'])], 'g', [image], [depth])
    onnx.save(helper.make_model(graph), tmp_path / 'g.onnx')
    assert onnx_fixed_dims(tmp_path / 'g.onnx') == ['height']


def test_depth_anythings_coarsest_map_sets_the_smallest_and_the_trace_size():
    """Its last level is a stride-2 conv of the patch grid (stride 28): the smallest side has that map 2 rows high
    (42), the trace makes it wider than high (42x70: 2x3), inputs still any multiple of 14."""
    from heads.export.sizes import trace_size
    from heads.models.depth_anything import depth_anything_v2_config
    cfg = depth_anything_v2_config('vits', embed_dim=32, num_heads=2)
    cfg['backbone'].update(depth=4, out_indices=(0, 1, 2, 3))
    model = heads.registry.MODELS.build(cfg).eval()
    assert (model.coarsest_stride, required_multiple(model), min_side(model)) == (28, 14, 42)
    assert trace_size(model) == (42, 70)
