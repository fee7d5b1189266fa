"""EoMT's optimizer settings as parts any config can name: LayerDecayOptimWrapperConstructor's 'eomt' style and
``decay_every_param``, and TwoStageWarmupPolyLR, against hand-worked numbers."""
from __future__ import annotations

import pytest
import torch
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope

from heads.engine.switches.warmup_poly import TwoStageWarmupPolyLR
from heads.models.classifier import ImageClassifier


def groups_of(style: str, decay_all: bool = False):
    model = ImageClassifier(backbone=dict(name='vit_tiny_patch16_224', depth=3, img_size=32),
                            num_classes=4)
    with DefaultScope.overwrite_default_scope('heads'):
        wrapper = build_optim_wrapper(model, dict(
            optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05), constructor='LayerDecayOptimWrapperConstructor',
            paramwise_cfg=dict(layer_decay_rate=0.5, backbone='classifier', layer_decay_style=style,
                               decay_every_param=decay_all)))
    return {g['name']: (g['lr'], g['weight_decay']) for g in wrapper.optimizer.param_groups}


def test_eomt_style_puts_the_last_block_at_the_base_rate_and_the_embeddings_with_the_first():
    groups = groups_of('eomt')  # 3 blocks: block i at 0.5 ** (2 - i)
    assert groups['classifier.patch_embed.proj.weight'] == (0.25, 0.05)  # with block 0
    assert groups['classifier.prefix.cls'] == (0.25, 0.0)
    assert [groups[f'classifier.blocks.{i}.mlp.fc1.weight'][0] for i in range(3)] == [0.25, 0.5, 1.0]
    assert groups['classifier.norm.weight'] == (1.0, 0.0)  # after the last block: the base rate
    assert groups['classifier.head.weight'] == (1.0, 0.05)
    beit = groups_of('beit')  # the default: one factor more everywhere in the backbone
    assert [beit[f'classifier.blocks.{i}.mlp.fc1.weight'][0] for i in range(3)] == [0.125, 0.25, 0.5]
    assert beit['classifier.patch_embed.proj.weight'][0] == 0.0625


def test_decay_every_param_decays_norms_biases_and_tokens():
    groups = groups_of('eomt', decay_all=True)
    assert {wd for _, wd in groups.values()} == {0.05}
    assert groups['classifier.prefix.cls'] == (0.25, 0.05) and groups['classifier.norm.bias'] == (1.0, 0.05)


def test_unknown_style_is_refused():
    with pytest.raises(ValueError, match="layer_decay_style must be one of"):
        groups_of('mae')


def optimizer(names=('backbone.blocks.0.attn.qkv.weight', 'mask_mlp.fc1.weight')):
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in names]
    return torch.optim.SGD([dict(params=[p], lr=1.0, name=n) for p, n in zip(params, names)])


def rates(scheduler, opt, steps: int) -> list[list[float]]:
    opt.step()
    out = []
    for _ in range(steps):
        out.append([g['lr'] for g in opt.param_groups])
        scheduler.step()
    return out


def test_two_stage_warmup_poly_hand_worked():
    # T = 10, warm-ups 2 (new) and 3 (backbone), power 1:
    #   new:      s / 2 for s < 2, then 1 - (s - 2) / 8
    #   backbone: 0 for s < 2, (s - 2) / 3 for s < 5, then 1 - (s - 5) / 5
    opt = optimizer()
    got = rates(TwoStageWarmupPolyLR(opt, warmup=(2, 3), power=1.0, end=10), opt, 10)
    backbone = [0, 0, 0, 1 / 3, 2 / 3, 1, 0.8, 0.6, 0.4, 0.2]
    new = [0, 0.5, 1, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125]
    assert [r[0] for r in got] == pytest.approx(backbone) and [r[1] for r in got] == pytest.approx(new)
    opt = optimizer()  # power 0.9 on the decay only
    got = rates(TwoStageWarmupPolyLR(opt, warmup=(2, 3), power=0.9, end=10), opt, 10)
    assert got[3][0] == pytest.approx(1 / 3) and got[7] == pytest.approx([0.6 ** 0.9, 0.375 ** 0.9])


def test_two_stage_warmup_poly_on_mmengines_wrapper_logs_the_new_parameters_rate():
    from mmengine.optim import OptimWrapper
    wrapper = OptimWrapper(optimizer())  # two groups: the wrapper adds its base-rate entry for the log
    assert len(wrapper.param_groups) == 3 and 'name' not in wrapper.param_groups[2]
    scheduler = TwoStageWarmupPolyLR(wrapper, warmup=(2, 3), power=1.0, end=10)
    wrapper.step()
    for _ in range(3):
        scheduler.step()
    base = wrapper.optimizer.defaults['lr']  # SGD's default: the rate no group overrides
    assert [g['lr'] for g in wrapper.param_groups] == pytest.approx([1 / 3, 0.875, 0.875 * base])


def test_two_stage_warmup_poly_resumes_where_it_stopped():
    opt = optimizer()
    scheduler = TwoStageWarmupPolyLR(opt, warmup=(2, 3), power=0.9, end=10)
    whole = rates(scheduler, opt, 10)
    opt = optimizer()
    first = TwoStageWarmupPolyLR(opt, warmup=(2, 3), power=0.9, end=10)
    rates(first, opt, 4)
    state = first.state_dict()
    opt2 = optimizer()  # as the runner resumes: the scheduler's state and the optimizer's rates loaded
    second = TwoStageWarmupPolyLR(opt2, warmup=(2, 3), power=0.9, end=10)
    second.load_state_dict(state)
    for group, saved in zip(opt2.param_groups, opt.param_groups):
        group['lr'] = saved['lr']
    assert sum(rates(second, opt2, 6), []) == pytest.approx(sum(whole[4:], []))


def test_two_stage_warmup_poly_refuses_what_it_cannot_schedule():
    with pytest.raises(ValueError, match='give end'):
        TwoStageWarmupPolyLR(optimizer(), warmup=(2, 3))
    with pytest.raises(ValueError, match='shorter than the run'):
        TwoStageWarmupPolyLR(optimizer(), warmup=(5, 5), end=10)
    unnamed = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="LayerDecayOptimWrapperConstructor"):
        TwoStageWarmupPolyLR(unnamed, warmup=(2, 3), end=10)
