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
