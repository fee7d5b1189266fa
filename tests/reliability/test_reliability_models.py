"""Issue 36, models: LoRA adapter files (their alpha applied, non-finite and damaged ones refused, merged states kept
apart, written atomically by the run's hook), distillation teachers that load exactly, an empty weights path that
reads nothing, and fp16 autocast with loss scaling (docs/reliability.md, "Faults")."""
import builtins
import collections
import errno
import json
import logging
import struct
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mmengine.optim import AmpOptimWrapper, build_optim_wrapper
from mmengine.registry import DefaultScope
from safetensors.torch import save as safetensors_bytes
from torch import nn

import zoo
from heads.engine.switches.autocast import AutocastOptimWrapper
from heads.models import ImageClassifier
from zoo.lora import adapter_state_dict, apply_lora, load_adapters, lora_modules, merge_lora, save_adapters
from zoo.lora_file import NonFiniteAdapterError, read_adapter_file
from zoo.weights import CheckpointError, CheckpointMismatchError, NotACheckpointError
from zoo.weights.checksum import checksum_mismatch

from ..backbones.test_lora import EVERY_LINEAR, _randomise_adapters, small
from .test_reliability_checkpoints import quick
from .test_reliability_fuzz import FUZZ

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402

FUZZ_EXAMPLES = 400
FUZZ_COUNTS: collections.Counter = collections.Counter()


def trained_adapters(tmp_path, alpha=16):
    """(base state, a LoRA model of it at ``alpha`` with random adapters, their file)."""
    torch.manual_seed(0)
    base = small('vit').eval().state_dict()
    model = small('vit').eval()
    model.load_state_dict(base)
    _randomise_adapters(apply_lora(model, EVERY_LINEAR, rank=4, alpha=alpha))
    save_adapters(model, tmp_path / 'adapters.safetensors')
    return base, model, tmp_path / 'adapters.safetensors'


def fresh(base, **lora):
    model = small('vit').eval()
    model.load_state_dict(base)
    return apply_lora(model, EVERY_LINEAR, rank=4, **lora)


def outputs(model, x):
    with torch.no_grad():
        return model(x)[-1]


# ------------------------------------------------------------------------------------------------ item 4: alpha
def test_adapters_load_with_the_alpha_they_were_trained_with(tmp_path, caplog):
    base, trained, path = trained_adapters(tmp_path, alpha=16)
    x = torch.randn(1, 3, 32, 48)
    model = fresh(base)  # default alpha (= rank 4): a quarter of the trained scale
    with caplog.at_level(logging.WARNING, logger='zoo.lora'):
        load_adapters(model, path)
    torch.testing.assert_close(outputs(model, x), outputs(trained, x), atol=1e-5, rtol=1e-5)
    assert 'alpha 16.0 applied' in caplog.text and 'alpha 4.0' in caplog.text
    assert model.lora_config['alpha'] == 16.0
    with pytest.raises(CheckpointMismatchError, match='trained with alpha 16.0, not the alpha=8'):
        load_adapters(fresh(base), path, alpha=8)


@pytest.mark.slow
def test_a_task_models_adapter_file_records_its_alpha_and_old_files_need_it_given(tmp_path):
    """The run's hook saves the task model, whose backbone holds the LoRA options: they are in the file."""
    from heads.registry import MODELS

    from ..reference import tiny_dpt
    cfg = tiny_dpt()
    cfg['backbone'] = {**cfg['backbone'], 'lora': dict(rank=2, alpha=6, targets=['*.attn.qkv'])}
    task = MODELS.build(cfg)
    save_adapters(task, tmp_path / 'task.safetensors')
    config = read_adapter_file(tmp_path / 'task.safetensors').config
    assert config['alpha'] == 6 and config['rank'] == 2 and config['targets'] == ['*.attn.qkv']
    state = adapter_state_dict(task)  # a file as the hook wrote it before: no alpha recorded
    (tmp_path / 'old.safetensors').write_bytes(safetensors_bytes(state, metadata={'lora_config': '{}'}))
    backbone = zoo.create_backbone(cfg['backbone']['name'], **{k: v for k, v in cfg['backbone'].items()
                                                               if k not in ('type', 'name')})
    with pytest.raises(CheckpointError, match=r'old.safetensors records no alpha.*alpha=\.\.\.'):
        load_adapters(backbone, tmp_path / 'old.safetensors')
    load_adapters(backbone, tmp_path / 'old.safetensors', alpha=6)
    assert all(m.lora_scale == 3.0 for m in lora_modules(backbone).values())


def test_adapters_of_another_rank_or_targets_name_the_options_to_adapt_with(tmp_path):
    base, _, path = trained_adapters(tmp_path)
    for wrong in (apply_lora(small('vit'), EVERY_LINEAR, rank=2), apply_lora(small('vit'), '*.attn.qkv', rank=4)):
        with pytest.raises(CheckpointMismatchError, match=r"adapters.safetensors do not fit.*apply_lora\(model, "
                                                          r"targets=.*rank=4, alpha=16\.0\)"):
            load_adapters(wrong, path)


# --------------------------------------------------------------------------------------- item 4: non-finite
def test_non_finite_adapters_are_refused_naming_the_tensor_and_the_file(tmp_path):
    base, trained, _ = trained_adapters(tmp_path)
    state = adapter_state_dict(trained)
    state['blocks.1.mlp.fc2.lora_b'] = state['blocks.1.mlp.fc2.lora_b'].clone()
    state['blocks.1.mlp.fc2.lora_b'][3, 1] = float('nan')
    (tmp_path / 'nan.safetensors').write_bytes(safetensors_bytes(state, metadata={'lora_config': '{"alpha": 16}'}))
    model = fresh(base)
    before = {k: v.clone() for k, v in adapter_state_dict(model).items()}
    with pytest.raises(NonFiniteAdapterError, match=r'nan.safetensors: tensor blocks.1.mlp.fc2.lora_b has 1 non-'):
        load_adapters(model, tmp_path / 'nan.safetensors')
    assert all(torch.equal(v, before[k]) for k, v in adapter_state_dict(model).items())  # the model as it was


# -------------------------------------------------------------------------------------- item 4: merged states
def test_a_merged_state_does_not_load_into_an_unmerged_model_nor_the_reverse(tmp_path):
    base, trained, _ = trained_adapters(tmp_path)
    x = torch.randn(1, 3, 32, 48)
    expected = outputs(trained, x)
    merged_state = merge_lora(trained).state_dict()
    assert merged_state['blocks.0.attn.qkv.lora_merged']
    with pytest.raises(CheckpointMismatchError, match=r'blocks.0.attn.qkv: the state was saved from a model with '
                                                      r'merged adapters.*count twice.*merge_lora\(model\)'):
        fresh(base).load_state_dict(merged_state)
    torch.save(merged_state, tmp_path / 'merged.pth')
    with pytest.raises(CheckpointMismatchError, match=r'merged.pth does not fit.*count twice'):
        zoo.load_pretrained(fresh(base), tmp_path / 'merged.pth')
    with pytest.raises(CheckpointMismatchError, match=r"this model's adapters are merged.*unmerge_lora\(model\)"):
        zoo.load_pretrained(merge_lora(fresh(base)), {k: v for k, v in merged_state.items()
                                                      if not k.endswith('lora_merged')}, format='zoo')
    into_merged = merge_lora(fresh(base))
    zoo.load_pretrained(into_merged, tmp_path / 'merged.pth')  # merged into merged: as saved
    torch.testing.assert_close(outputs(into_merged, x), expected, atol=1e-5, rtol=1e-5)


# -------------------------------------------------------------------------------------- item 5: teachers
def test_a_teacher_of_another_class_count_is_refused_not_given_a_random_head(tmp_path):
    options = dict(name='vit_tiny_patch16_224', depth=1, img_size=32, patch_size=8)
    trained = ImageClassifier(backbone=options, num_classes=11)
    torch.save({'state_dict': trained.state_dict()}, tmp_path / 'teacher.pth')
    student = dict(backbone=dict(options, name='deit_tiny_distilled_patch16_224'), num_classes=5)
    with pytest.raises(CheckpointMismatchError, match=r"teacher.pth does not load exactly.*head.weight \(11, 192\).*"
                                                      r"5 classes asked for.*train the teacher on the student's"):
        ImageClassifier(**student, distillation=dict(teacher=dict(checkpoint=str(tmp_path / 'teacher.pth'),
                                                                  name=options['name'], depth=1, img_size=32,
                                                                  patch_size=8)))
    exact = ImageClassifier(**dict(student, num_classes=11), distillation=dict(teacher=dict(
        checkpoint=str(tmp_path / 'teacher.pth'), name=options['name'], depth=1, img_size=32, patch_size=8)))
    assert all(torch.equal(exact._teacher[0].state_dict()[k], v) for k, v in trained.classifier.state_dict().items())


def test_a_torchvision_teacher_of_another_class_count_is_refused_clearly(tmp_path):
    import torchvision
    from safetensors.torch import save_file

    from heads.losses.distillation import build_teacher
    save_file(torchvision.models.resnet18(weights=None, num_classes=7).state_dict(), tmp_path / 'r18.safetensors')
    with pytest.raises(CheckpointMismatchError, match=r"r18.safetensors does not fit torchvision's resnet18 with "
                                                      r"num_classes=5.*fc.weight \(7, 512\) vs model \(5, 512\)"):
        build_teacher('resnet18', str(tmp_path / 'r18.safetensors'), num_classes=5, source='torchvision')


# -------------------------------------------------------------------------------------- item 6: empty paths
def test_an_empty_weights_path_reads_nothing_from_the_current_folder(tmp_path, monkeypatch, caplog):
    from safetensors.torch import save_file
    options = dict(depth=1, out_indices=(0,))
    save_file(zoo.create_backbone('vit_tiny_patch16_224', **options).state_dict(), tmp_path / 'model.safetensors')
    monkeypatch.chdir(tmp_path)  # a folder holding a model.safetensors that fits
    for empty in ('', '  '):
        with pytest.raises(NotACheckpointError, match=r"path is empty.*pretrained=None"):
            zoo.create_backbone('vit_tiny_patch16_224', pretrained=empty, **options)
    from heads.hf.folder import from_pretrained_hf
    with pytest.raises(NotACheckpointError, match='path is empty'):
        from_pretrained_hf('')
    with caplog.at_level(logging.INFO, logger='zoo.weights.io'):  # a folder: by exact name, and said
        zoo.create_backbone('vit_tiny_patch16_224', pretrained=str(tmp_path), **options)
    assert f'weights of folder {tmp_path}: reading model.safetensors' in caplog.text


# ------------------------------------------------------------------------------ item 7: the hook's atomic write
class FailsHalfWay:
    """A file opened for writing whose write stores half its data and fails as a full disk does."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        self.f.write(data[:len(data) // 2])
        self.f.flush()
        raise OSError(errno.ENOSPC, 'No space left on device (injected)')


def fail_nth_adapter_write(monkeypatch, nth: int) -> None:
    """From now on, the ``nth`` opening of the adapter file (or its partial) for writing fails half-way."""
    real_open, writes = builtins.open, []

    def faulty_open(file, mode='r', *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if 'w' in mode and Path(str(file)).name in ('lora_adapters.safetensors', 'lora_adapters.safetensors.partial'):
            writes.append(file)
            if len(writes) == nth:
                return FailsHalfWay(f)
        return f

    monkeypatch.setattr(builtins, 'open', faulty_open)


@pytest.mark.slow
def test_a_failed_adapter_write_keeps_the_previous_file_whole(tmp_path, monkeypatch):
    """A real LoRA run; the adapter file's second write (with iter_2's checkpoint) fails half-way at the file
    layer, as a full disk does: the run stops as on a full disk, the file of iter 1 is whole, no partial is left."""
    monkeypatch.chdir(ROOT)
    fail_nth_adapter_write(monkeypatch, 2)
    with pytest.raises(OSError, match=r'disk full.*iter_2.pth.*kept: .*iter_1.pth'):
        train_tool.main(quick(tmp_path, 2, 'model.backbone.lora.rank=2'))
    monkeypatch.undo()
    adapters = read_adapter_file(tmp_path / 'lora_adapters.safetensors')
    state = torch.load(tmp_path / 'iter_1.pth', weights_only=True)['state_dict']
    assert adapters.tensors and all(torch.equal(v, state[k]) for k, v in adapters.tensors.items())
    assert not list(tmp_path.glob('*.partial*'))


def test_save_adapters_called_directly_keeps_the_previous_file_when_a_write_fails(tmp_path, monkeypatch):
    model = small('vit')
    apply_lora(model, rank=2)
    path = tmp_path / 'lora_adapters.safetensors'
    save_adapters(model, path)
    before = path.read_bytes()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    fail_nth_adapter_write(monkeypatch, 1)
    with pytest.raises(OSError, match='No space left'):
        save_adapters(model, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and checksum_mismatch(path) is None
    assert not list(tmp_path.glob('*.partial*'))


# ------------------------------------------------------------------------------------- item 8: fp16 loss scale
def built_wrapper(dtype):
    """Built in scope ``heads``, as a Runner of a config (``default_scope = 'heads'``) builds it: without the scope
    the name is found only when an earlier test in this process left that scope current."""
    model = nn.Linear(8, 8)
    with DefaultScope.overwrite_default_scope('heads'):
        return model, build_optim_wrapper(model, dict(type='AutocastOptimWrapper', dtype=dtype,
                                                      optimizer=dict(type='SGD', lr=1e6)))


def test_fp16_autocast_scales_its_loss_and_bf16_does_not():
    """Gradients of 1e-9 underflow in fp16 (smallest subnormal 6e-8): with the scaler they arrive, unscaled."""
    model, fp16 = built_wrapper('float16')
    assert isinstance(fp16, AmpOptimWrapper) and isinstance(fp16.loss_scaler, torch.amp.GradScaler)
    _, bf16 = built_wrapper('bfloat16')
    assert isinstance(bf16, AutocastOptimWrapper) and bf16.loss_scaler is None
    before = model.weight.detach().clone()
    with fp16.optim_context(model):
        out = model(torch.ones(4, 8))
    assert out.dtype == torch.float16
    fp16.update_params(out.float().sum() * 1e-9)
    change = (before - model.weight.detach()).abs()
    assert change.min() > 0 and torch.allclose(change, torch.full_like(change, 4e-3), rtol=1e-2)
    assert 'loss_scaler' in fp16.state_dict() and 'loss_scaler' not in bf16.state_dict()
    with pytest.raises(ValueError, match="dtype must be one of.*'float32'"):
        built_wrapper('float32')


# ---------------------------------------------------------------------------------------------------- fuzz
def _tiny():
    torch.manual_seed(0)
    model = apply_lora(nn.Sequential(OrderedDict(fc=nn.Linear(6, 5), out=nn.Linear(5, 3))), ('fc', 'out'), rank=2)
    _randomise_adapters(model)
    return model


ALPHAS = st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2),
                   st.dictionaries(st.sampled_from(['fc', 'out', 'x']), st.floats(-1, 20), max_size=3))
CONFIGS = st.one_of(st.fixed_dictionaries({}, optional={'alpha': ALPHAS, 'rank': ALPHAS, 'targets': ALPHAS,
                                                        'dropout': ALPHAS}).map(json.dumps),
                    st.text(max_size=12), st.just('null'), st.just('[1, 2]'))


@st.composite
def adapter_files(draw):
    """The bytes of a damaged adapter file of :func:`_tiny`: its tensors and metadata changed, or its bytes cut."""
    state = {k: v.clone() for k, v in adapter_state_dict(_tiny()).items()}
    for key in draw(st.sampled_from([[], []]) | st.lists(st.sampled_from(sorted(state)), max_size=2, unique=True)):
        change = draw(st.sampled_from(['drop', 'nan', 'inf', 'shape', 'int', 'vector', 'rename']))
        value = state.pop(key)
        if change == 'nan' or change == 'inf':
            value.view(-1)[draw(st.integers(0, value.numel() - 1))] = float(change)
        elif change == 'shape':
            value = torch.randn(*draw(st.lists(st.integers(1, 7), min_size=2, max_size=2)))
        elif change == 'int':
            value = value.round().to(torch.int64)
        elif change == 'vector':
            value = value.flatten()
        if change != 'drop':
            state[key + ('x' if change == 'rename' else '')] = value
    kept = json.dumps({'targets': ['fc', 'out'], 'rank': 2, 'alpha': draw(st.sampled_from([2, 0.5, 16.0]))})
    metadata = draw(st.sampled_from([{}, {'lora_config': kept}, {'lora_config': kept}, None]))
    metadata = {'lora_config': draw(CONFIGS)} if metadata is None else metadata
    data = safetensors_bytes(state, metadata=metadata) if state else b''
    cut = draw(st.sampled_from(['whole', 'whole', 'truncated', 'header length', 'byte']))
    if cut == 'truncated':
        data = data[:draw(st.integers(0, max(len(data) - 1, 0)))]
    elif cut == 'header length':
        data = struct.pack('<Q', draw(st.integers(0, 2 ** 64 - 1))) + data[8:]
    elif cut == 'byte' and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, **FUZZ)
@given(data=adapter_files())
def test_fuzz_adapter_files_are_loaded_or_refused_and_nothing_is_lost(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp('adapters', numbered=True)
    good = folder / 'good.safetensors'
    save_adapters(_tiny(), good)
    kept = good.read_bytes()
    path = folder / 'lora_adapters.safetensors'
    path.write_bytes(data)
    model = apply_lora(nn.Sequential(OrderedDict(fc=nn.Linear(6, 5), out=nn.Linear(5, 3))), ('fc', 'out'), rank=2)
    before = {k: v.clone() for k, v in adapter_state_dict(model).items()}
    try:
        load_adapters(model, path)
        FUZZ_COUNTS['loaded'] += 1
        assert all(torch.isfinite(v).all() for v in adapter_state_dict(model).values())
    except CheckpointError as err:
        FUZZ_COUNTS['refused'] += 1
        assert 'lora_adapters.safetensors' in str(err)
        assert all(torch.equal(v, before[k]) for k, v in adapter_state_dict(model).items())  # untouched
    assert path.read_bytes() == data and good.read_bytes() == kept  # read, never written or removed
    FUZZ_COUNTS['examples'] += 1


def test_fuzz_count_is_reported(capsys):
    """Runs after the fuzz (file order): its count, for docs/reliability.md."""
    if not FUZZ_COUNTS:
        pytest.skip('the fuzz test did not run in this process')
    with capsys.disabled():
        print(f"\nadapter-file fuzz: {FUZZ_COUNTS['examples']} files, {FUZZ_COUNTS['loaded']} loaded, "
              f"{FUZZ_COUNTS['refused']} refused, 0 raw exceptions, 0 files lost")
    assert FUZZ_COUNTS['examples'] == FUZZ_EXAMPLES
