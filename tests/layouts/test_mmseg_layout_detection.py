"""Issue 36.2: telling mmseg's DPT layout from this project's by names ours never have. A Swin DPT's own keys start
with ``backbone.layers.`` (its stages) and were read as mmseg's: its checkpoints failed to load, or with
``load_from_partial=True`` trained on with a random head. A state that is neither layout cleanly is refused; a
bounded derandomized fuzz of random key sets (ours, mmseg's, both, junk; random shapes) meets only this project's
errors (the count is printed at the end)."""
import collections
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mmengine.config import Config

import heads
from heads.layouts.mmseg import _SIGNATURE, MixedLayoutError, dpt_from_mmseg, from_mmseg
from heads.models.task_checkpoint import load_task_checkpoint, task_checkpoint_layout
from zoo.weights import CheckpointError

from ..reporting import show
from .test_mmseg_recipe import mmseg_state, tiny_cfg

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'
FUZZ_EXAMPLES = 300
COUNTS: collections.Counter = collections.Counter()


def tiny_swin_dpt() -> torch.nn.Module:
    """configs/dpt_swint_ade20k.py's model with one block per stage and a narrow neck."""
    cfg = Config.fromfile(str(CONFIGS / 'dpt_swint_ade20k.py'))
    cfg.model.backbone.depths = (1, 1, 1, 1)
    cfg.model.neck.update(hidden_channels=(8, 16, 32, 32), fusion_channels=16)
    cfg.model.decode_head.update(in_channels=16, num_classes=5)
    torch.manual_seed(0)
    return heads.MODELS.build(cfg.model), cfg


def test_a_swin_dpt_checkpoint_is_this_projects_layout_and_loads_exactly(tmp_path):
    model, _ = tiny_swin_dpt()
    state = model.state_dict()
    assert any(k.startswith('backbone.layers.') for k in state)  # what was taken for mmseg's ViT
    path = tmp_path / 'iter_1.pth'
    torch.save({'meta': {'iter': 1}, 'state_dict': state}, path)  # as the runner writes it
    assert task_checkpoint_layout(state, model) == 'zoo'
    fresh, _ = tiny_swin_dpt()
    with torch.no_grad():
        for p in fresh.parameters():
            p.add_(1.0)
    report = load_task_checkpoint(fresh, path)
    assert report.format == 'zoo' and not (report.missing or report.unexpected or report.mismatched)
    assert all(torch.equal(v, state[k]) for k, v in fresh.state_dict().items())


@pytest.mark.slow
def test_load_from_partial_of_a_swin_dpt_checkpoint_keeps_its_head(tmp_path):
    """Before: every key was 'converted' away from the model's names, the partial load kept nothing (exit 0)."""
    from heads.engine import ZooRunner
    model, cfg = tiny_swin_dpt()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
    torch.save({'meta': {'iter': 1}, 'state_dict': model.state_dict()}, tmp_path / 'swin.pth')
    cfg.work_dir, cfg.load_from, cfg.load_from_partial = str(tmp_path / 'work'), str(tmp_path / 'swin.pth'), True
    runner = ZooRunner.from_cfg(cfg)
    runner.load_or_resume()
    loaded = runner.model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in model.state_dict().items())


def test_mmseg_names_mixed_with_ours_are_refused_naming_the_file_and_keys(tmp_path):
    ours = heads.MODELS.build(tiny_cfg().model).state_dict()
    mixed = {**mmseg_state(), 'neck.fusion.0.proj.weight': ours['neck.fusion.0.proj.weight']}
    path = tmp_path / 'mixed.pth'
    torch.save({'meta': {}, 'state_dict': mixed}, path)
    model = heads.MODELS.build(tiny_cfg().model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(MixedLayoutError, match=r"mixed\.pth: neither this project's layout nor mmseg's DPT(.|\n)*"
                                               r"decode_head\.reassemble_blocks|backbone\.layers\.0\.ln1(.|\n)*"
                                               r"neck\.fusion\.0\.proj\.weight"):
        load_task_checkpoint(model, path, strict=False)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # nothing loaded
    assert task_checkpoint_layout(mmseg_state(), model) == 'mmseg'  # mmseg's own, whole: still read


# -------------------------------------------------------------------------------------------------------- fuzz
def _key_pool() -> list[str]:
    swin, _ = tiny_swin_dpt()
    vit = heads.MODELS.build(tiny_cfg().model)
    junk = ['backbone.layers.0.ln1', 'backbone.layers.x.ffn.layers.0.0.weight', 'decode_head.conv_seg',
            'decode_head.convs.', 'backbone.patch_embed.projection.weight.extra', 'auxiliary_head.conv_seg.weight',
            'module.backbone.cls_token', '', 'decode_head.head.9.weight', 'backbone.pos_embed']
    return sorted({*mmseg_state(), *swin.state_dict(), *vit.state_dict(), *junk})


@pytest.fixture(scope='module')
def fuzz_target(request):
    keys = _key_pool()
    model = heads.MODELS.build(tiny_cfg().model)
    yield keys, model
    if COUNTS['inputs']:
        show(request, f"fuzz: mmseg layout detection/conversion: {COUNTS['inputs']} key sets ({COUNTS['mmseg']} "
             f"read as mmseg, {COUNTS['zoo']} as ours, {COUNTS['mixed']} refused as mixed, {COUNTS['refused']} "
             f"refused in all, {COUNTS['loaded']} loaded); raw exceptions: 0")
    assert COUNTS['inputs'] == 0 or COUNTS['inputs'] >= FUZZ_EXAMPLES


def _tensor(shape_seed: int) -> torch.Tensor:
    shapes = [(), (1,), (3,), (2, 2), (1, 1, 32), (96, 3, 16, 16), (0,), (5, 16, 1, 1), (4, 4, 3, 3)]
    shape = shapes[shape_seed % len(shapes)]
    return torch.full(shape, float(shape_seed % 7), dtype=torch.int64 if shape_seed % 11 == 0 else torch.float32)


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None, print_blob=False,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_layout_detection_and_conversion_raise_only_checkpoint_errors(fuzz_target, data):
    keys, model = fuzz_target
    chosen = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=40, unique=True), label='keys')
    shapes = data.draw(st.lists(st.integers(0, 99), min_size=len(chosen), max_size=len(chosen)), label='shapes')
    state = {k: _tensor(s) for k, s in zip(chosen, shapes)}
    COUNTS['inputs'] += 1
    try:
        layout = task_checkpoint_layout(state, model, 'fuzz.pth')
        COUNTS[layout] += 1
        if layout == 'mmseg':
            assert set(dpt_from_mmseg(state)) and from_mmseg(state, None) == dpt_from_mmseg(state)
        from_mmseg(state, 'vit')
        load_task_checkpoint(model, state, strict=data.draw(st.booleans(), label='strict'), name='fuzz.pth')
        COUNTS['loaded'] += 1
    except CheckpointError as err:
        assert 'fuzz.pth' in str(err) or 'mmseg' in str(err), err
        COUNTS['refused'] += 1
        COUNTS['mixed'] += isinstance(err, MixedLayoutError)
    if any(_SIGNATURE.search(k) for k in state) and set(state) & set(model.state_dict()):
        with pytest.raises(MixedLayoutError):  # mmseg's names beside ours: never half converted
            task_checkpoint_layout(state, model, 'fuzz.pth')
