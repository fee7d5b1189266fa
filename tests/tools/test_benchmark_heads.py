"""tools/benchmark_heads.py: a row per head (EoMT: per masked-attention setting) with positive finite times and
ratios, on tiny configs of the same transformers models; a pair whose outputs differ is refused and not timed; sizes
EoMT cannot take are refused before anything is built."""
import math

import benchmark_heads as tool
import pytest
import torch

from lab.benchmark import head_pairs

from .records import own_store, series_records

transformers = pytest.importorskip('transformers')


def test_relative_difference_is_the_largest_over_the_outputs_of_max_abs_over_the_scale():
    want = (torch.tensor([1.0, -4.0]), torch.tensor([[2.0, 0.5]]))
    got = (torch.tensor([1.5, -4.0]), torch.tensor([[2.0, 0.4]]))
    assert head_pairs.relative_difference(got, want) == pytest.approx(max(0.5 / 4, 0.1 / 2))
    assert head_pairs.relative_difference(want, want) == 0
    assert head_pairs.relative_difference((torch.ones(2, 1),), (torch.ones(1, 2),)) == math.inf


def test_a_pair_whose_outputs_differ_is_refused_and_not_timed():
    ours, reference = head_pairs.build_pair('upernet', (64, 64), tiny=True)
    x = torch.randn(1, 3, 64, 64)
    ours_call = lambda: head_pairs.outputs_ours('upernet', ours, x)  # noqa: E731
    reference_call = lambda: head_pairs.outputs_hf('upernet', reference, x)  # noqa: E731
    row = head_pairs.measure('UperNet', ours_call, reference_call, 1)
    assert 'refused' not in row and row['difference'] <= 1e-5 and row['ours_s'] > 0 and row['hf_s'] > 0
    with torch.no_grad():  # class 0's logits shifted by 1e-3 of the output scale: a small but real difference
        ours.decode_head.conv_seg.bias[0] += 1e-3 * reference_call()[0].abs().max()
    row = head_pairs.measure('UperNet', ours_call, reference_call, 1)
    assert 'refused' in row and 'ours_s' not in row and row['difference'] == pytest.approx(1e-3, rel=0.05)
    assert head_pairs.table([row])[-1].startswith('| UperNet | - | - | refused: outputs differ by 1.0e-03')


@pytest.mark.slow
def test_the_time_ratio_tells_a_call_doing_three_times_the_work():
    """The ratio ours / reference is the paired median, right way round: the same call on both sides gives about 1,
    a reference doing the work three times about 1/3 (a ratio only checked for '> 0' passed either way, or
    inverted). Bounds wide enough for a busy machine (the calls take ~10 ms)."""
    ours, reference = head_pairs.build_pair('upernet', (64, 64), tiny=True)
    x = torch.randn(1, 3, 64, 64)
    ours_call = lambda: head_pairs.outputs_ours('upernet', ours, x)  # noqa: E731
    thrice = lambda: (ours_call(), ours_call(), ours_call())[2]  # noqa: E731
    same = head_pairs.measure('same', ours_call, ours_call, 9)['ratio']
    slowed = head_pairs.measure('slowed', ours_call, thrice, 9)['ratio']
    assert 0.6 < same < 1.67 and 0.15 < slowed < 0.6, (same, slowed)


@pytest.mark.parametrize('argv, message', [(['--size', '64', '96'], 'square'), (['--size', '72', '72'], '16'),
                                           (['--heads', 'upernet', '--rounds', '0'], 'positive')])
def test_sizes_eomt_cannot_take_are_refused_before_building(argv, message):
    with pytest.raises(SystemExit, match=message):
        tool.main(argv)


@pytest.mark.slow
def test_the_tool_reports_a_row_per_head_with_positive_finite_ratios(tmp_path, capsys, monkeypatch):
    """... and records each row (series benchmark_heads) with both sides' rounds and the printed figures."""
    folder = own_store(monkeypatch, tmp_path)
    out = tmp_path / 'heads.md'
    rows = tool.main(['--tiny', '--size', '64', '64', '--rounds', '2', '--threads', '1', '--out', str(out)])
    text = out.read_text()
    assert text in capsys.readouterr().out
    table = [line.split('|')[1:-1] for line in text.splitlines() if line.startswith('| ') and ' s |' not in line]
    assert [cells[0].strip() for cells in table] == ['UperNet, Swin-T (tiny)', 'Mask2Former, Swin-T (tiny)',
                                                     'EoMT, ViT-S/16 (tiny), masks off',
                                                     'EoMT, ViT-S/16 (tiny), masks on']
    for cells in table:
        ours, theirs, ratio, rounds, difference = (float(c) for c in cells[1:])
        assert all(math.isfinite(v) and v > 0 for v in (ours, theirs, ratio)) and rounds == 2 and difference <= 1e-4
    assert [row['ratio'] for row in rows] == pytest.approx([float(cells[3]) for cells in table], abs=5e-4)
    assert 'load average (1 min)' in text and tool.cpu_name() in text and 'torch ' in text
    assert 'python tools/benchmark_heads.py --tiny --size 64 64' in text
    records = series_records(folder, 'benchmark_heads')  # the run above (the masks-on run below adds one)
    common = {'size': '64x64', 'batch': 1, 'reference': 'transformers', 'tiny': True}
    assert [r['settings'] for r in records] == [{'head': 'upernet', **common}, {'head': 'mask2former', **common},
                                                {'head': 'eomt', 'eomt_masked': False, **common},
                                                {'head': 'eomt', 'eomt_masked': True, **common}]
    for entry, cells in zip(records, table):
        assert {k: len(v) for k, v in entry['rounds'].items()} == {'ours': 2, 'reference': 2}
        assert [f"{entry['metrics'][k]:.3f}" for k in ('ours_s', 'hf_s', 'ratio')] == [c.strip() for c in cells[1:4]]
    masks_on = tool.main(['--tiny', '--heads', 'eomt', '--size', '32', '32', '--rounds', '1', '--eomt-masked', 'on'])
    assert [row['head'] for row in masks_on] == ['EoMT, ViT-S/16 (tiny), masks on']
    (extra,) = series_records(folder, 'benchmark_heads')[4:]
    assert extra['settings'] == {**common, 'size': '32x32', 'head': 'eomt', 'eomt_masked': True}
    assert len(extra['rounds']['ours']) == 1
