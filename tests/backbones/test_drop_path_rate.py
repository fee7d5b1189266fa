"""``drop_path_rate`` is checked in one place (zoo.backbones.common.check_drop_path_rate) on its way to the blocks of
every family: a number in [0, 1), else a ValueError naming the value (issue 53). Before, a negative rate reached the
blocks as per-block probabilities and was refused (or not) by whichever block came first, naming that block's."""
import pytest
import torch

import zoo
from zoo.backbones.common import drop_path_rates

NAMES = ['vit_tiny_patch16_224', 'deit_tiny_distilled_patch16_224', 'cvt_13_224', 'swin_tiny_patch4_window7_224',
         'pit_ti_224', 'levit_128s', 'crossvit_tiny_240', 'coatnet_0_224', 'vit_small_patch16_dinov3']


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('rate', [-0.5, 1.0, 1.5, float('nan')])
def test_every_family_refuses_a_rate_outside_0_1_naming_it(name, rate):
    with torch.device('meta'), pytest.raises(ValueError, match=rf"drop_path_rate must be a number in \[0, 1\).*"
                                                               rf"got {rate!r}"):
        zoo.create_backbone(name, drop_path_rate=rate)


def test_the_rule_rises_linearly_to_the_rate_over_all_blocks():
    assert [pytest.approx(r) for r in drop_path_rates(0.3, [2, 2])] == [[0.0, 0.1], [0.2, 0.3]]
    assert drop_path_rates(0, [1]) == [[0.0]]
    model = zoo.create_backbone('vit_tiny_patch16_224', depth=3, drop_path_rate=0.2, out_indices=(2,))
    assert [getattr(b.drop_path1, 'p', 0.0) for b in model.blocks] == [0.0, pytest.approx(0.1), pytest.approx(0.2)]
