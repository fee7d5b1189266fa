"""The relative-position table under torch.compile: at a concrete grid equal to the build window the table is read
as it is (no resampling graph: 19 bisection steps per axis and block, whose inductor lowering took over 15 minutes
for a Swin-T), while a size that differs is still resampled in the graph, equal to eager."""
import pytest
import torch

from zoo.core import RelPosBias


def compiled_ops(module, grid):
    seen = []

    def backend(gm, inputs):
        seen.extend(str(node.target) for node in gm.graph.nodes if node.op in ('call_function', 'call_method'))
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(module, backend=backend, fullgraph=True)(grid)
    return out, seen


@pytest.mark.slow
def test_the_build_window_reads_the_table_without_a_resampling_graph():
    torch.manual_seed(0)
    bias = RelPosBias((7, 7), num_heads=3).eval()
    out, ops = compiled_ops(bias, (7, 7))
    with torch.no_grad():
        assert torch.equal(out, bias((7, 7)))
    assert not any('pow' in op or 'where' in op or 'one_hot' in op for op in ops), ops


@pytest.mark.slow
def test_another_grid_is_resampled_in_the_graph_as_in_eager():
    torch.manual_seed(0)
    bias = RelPosBias((7, 7), num_heads=3).eval()
    out, ops = compiled_ops(bias, (5, 9))
    with torch.no_grad():
        torch.testing.assert_close(out, bias((5, 9)), rtol=1e-5, atol=1e-6)
    assert any('pow' in op for op in ops)


class FittedWindowBias(torch.nn.Module):
    """The bias of a Swin window fitted to a dynamic map: (min(h / 8, 7), min(w / 8, 7)) for an 'b c h w' input."""

    def __init__(self):
        super().__init__()
        self.bias = RelPosBias((7, 7), num_heads=2)

    def forward(self, x):
        return self.bias((torch.sym_min(x.shape[-2] // 8, 7), torch.sym_min(x.shape[-1] // 8, 7)))


@pytest.mark.slow
def test_a_window_fitted_to_a_dynamic_map_reads_precomputed_matrices_as_in_eager():
    """A symbolic table size known to be at most the built one (Swin's fitted window) is resampled by matrices
    precomputed for every smaller window, indexed in the graph: no bisection traced (torch.export of Swin-T with
    one block per stage: 2920 graph nodes before, 1106 after), the same bias as eager on each side of the window."""
    torch.manual_seed(0)
    module = FittedWindowBias().eval()
    rows, cols = torch.export.Dim('rows', min=2, max=32), torch.export.Dim('cols', min=2, max=32)
    dims = {'x': {2: 8 * rows, 3: 8 * cols}}
    program = torch.export.export(module, (torch.randn(1, 1, 80, 96),), dynamic_shapes=dims, strict=False)
    ops = [str(n.target) for n in program.graph.nodes if n.op == 'call_function']
    assert not any('pow' in op or 'one_hot' in op for op in ops), ops
    with torch.no_grad():
        for h, w in ((16, 24), (40, 56), (56, 56), (80, 120)):
            x = torch.randn(1, 1, h, w)
            torch.testing.assert_close(program.module()(x), module(x), rtol=1e-6, atol=1e-6)
