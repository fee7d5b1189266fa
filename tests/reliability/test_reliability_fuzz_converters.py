"""Issue 36: a bounded fuzz of the layout converters and of the sizes in a transformers config.json (hypothesis:
derandomized, fixed example counts, so CI runs the same inputs every time, in about 15 s).

- converters: real small DINOv2 (timm, official with registers, transformers), Swin V1 / V2, EVA (mixed RoPE), PiT and
  LeViT state dicts with keys dropped and tensors of other ranks or lengths, loaded into our model of that family in
  every layout ('auto', 'timm', 'hf', 'official'): each loads or raises a zoo.weights.CheckpointError naming the
  file, never a raw exception;
- config.json sizes (image_size, patch_size, hidden sizes, layers, neck and fusion widths over 1 .. 2^20): each is
  read or refused with an HFConfigError naming the file, and what is read describes a model within
  :data:`heads.hf.model_size.MAX_PARAMETERS` (counted on the meta device), so nothing allocates past the bound.

The counts are printed at the end of the module (and asserted).
"""
import collections
import json
import resource

import pytest
import timm
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heads  # noqa: F401  (registers the models the config check builds)
import zoo
from heads.hf.config import HFConfigError, read_config_json
from heads.hf.depth_anything import depth_anything_config_from_hf
from heads.hf.dpt import model_config_from_hf
from heads.hf.model_size import MAX_PARAMETERS
from heads.registry import MODELS
from zoo.weights import CheckpointError, load_pretrained

from ..reporting import show
from .test_reliability_converters import DEPTH_ANYTHING_CONFIG, DINO, DPT_CONFIG, SWIN, official_register_state

EXAMPLES = {'converters': 400, 'config.json sizes': 120}
COUNTS: collections.Counter = collections.Counter()
OUTCOMES: collections.Counter = collections.Counter()
FUZZ = dict(derandomize=True, deadline=None, database=None, print_blob=False,
            suppress_health_check=list(HealthCheck))
NAME = 'fuzzed.safetensors'  # what load_pretrained calls the state dict: each error must name it
RSS_BOUND_MIB = 2048  # growth of the process's peak memory over the whole module


def _states_and_models() -> dict:
    """family: (seed state dict in its own layout, our model it loads into)."""
    import transformers
    rope = dict(depth=1, img_size=32, embed_dim=32, num_heads=2)
    v2 = dict(SWIN, img_size=64)
    hf = transformers.Dinov2Model(transformers.Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                            image_size=28, patch_size=14, intermediate_size=128))
    dino = zoo.create_classifier('vit_small_patch14_reg4_dinov2', **DINO)
    return {
        'dinov2 (timm)': (timm.create_model('vit_small_patch14_reg4_dinov2', **DINO).state_dict(), dino),
        'dinov2 (official)': (official_register_state(), dino),
        'dinov2 (transformers)': (hf.state_dict(), zoo.create_classifier('vit_small_patch14_dinov2', **DINO)),
        'swin': (timm.create_model('swin_tiny_patch4_window7_224', window_size=7, **SWIN).state_dict(),
                 zoo.create_classifier('swin_tiny_patch4_window7_224', window=7, **SWIN)),
        'swin v2': (timm.create_model('swinv2_tiny_window8_256', window_size=8, **v2).state_dict(),
                    zoo.create_classifier('swinv2_tiny_window8_256', window=8, **v2)),
        'eva (mixed rope)': (timm.create_model('vit_small_patch16_rope_mixed_224', **rope).state_dict(),
                             zoo.create_classifier('vit_small_patch16_rope_mixed_224', **rope)),
        'pit': (timm.create_model('pit_ti_224', img_size=(64, 96), depth=(1, 1, 1)).state_dict(),
                zoo.create_classifier('pit_ti_224', img_size=64, depths=(1, 1, 1))),
        'levit': (timm.create_model('levit_128s', depth=(1, 1, 1)).state_dict(),
                  zoo.create_classifier('levit_128s', depths=(1, 1, 1))),
    }


SEEDS = _states_and_models()


@pytest.fixture(scope='module', autouse=True)
def _report(request):
    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 - start
    outcomes = ', '.join(f"{what}: {COUNTS[what]} ({OUTCOMES[what, 'read']} read, "
                         f"{OUTCOMES[what, 'refused']} refused)" for what in EXAMPLES if COUNTS[what])
    show(request, f"fuzz: {outcomes}; raw exceptions: 0; peak memory grew {grown} MiB (bound {RSS_BOUND_MIB})")
    assert grown < RSS_BOUND_MIB


def _edited(value: torch.Tensor, how: str) -> torch.Tensor:
    if how == 'flatten':
        return value.flatten()
    if how == 'unsqueeze':
        return value[None]
    if how == 'scalar':
        return value.flatten()[:1].reshape(()) if value.numel() else torch.zeros(())
    dim = 0 if how.endswith('first') else value.ndim - 1
    if value.ndim == 0:
        return value
    shape = list(value.shape)
    shape[dim] = max(shape[dim] + (1 if how.startswith('grow') else -1), 0)
    return torch.zeros(shape, dtype=value.dtype)


edits = st.lists(st.tuples(st.integers(0, 1 << 16), st.sampled_from(
    ['drop', 'flatten', 'unsqueeze', 'scalar', 'grow first', 'grow last', 'shrink first', 'shrink last'])),
    min_size=1, max_size=3)


@settings(max_examples=EXAMPLES['converters'], **FUZZ)
@given(family=st.sampled_from(sorted(SEEDS)), changes=edits,
       layout=st.sampled_from(['auto', 'auto', 'timm', 'hf', 'official']))
def _converters(family, changes, layout):
    COUNTS['converters'] += 1
    seed, model = SEEDS[family]
    state = dict(seed)
    for position, how in changes:
        key = sorted(state)[position % len(state)]
        if how == 'drop':
            del state[key]
        else:
            state[key] = _edited(state[key], how)
    try:
        load_pretrained(model, state, format=layout, name=NAME)
    except CheckpointError as err:
        assert NAME in str(err), str(err)
        OUTCOMES['converters', 'refused'] += 1
    else:
        OUTCOMES['converters', 'read'] += 1


SIZE = st.integers(1, 1 << 20) | st.integers(1, 1 << 10) | st.sampled_from([1, 14, 16, 32, 384, 518, 1024, 4096])
DPT_FIELDS = ['image_size', 'patch_size', 'hidden_size', 'num_hidden_layers', 'intermediate_size',
              'fusion_hidden_size', 'num_attention_heads']
DEPTH_ANYTHING_FIELDS = ['image_size', 'patch_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads']


def _config(kind: str, changes, widths) -> dict:
    if kind == 'dpt':
        config = json.loads(json.dumps(DPT_CONFIG))
        config.update({field: value for field, value in changes if field in DPT_FIELDS})
        config['neck_hidden_sizes'] = widths
        return config
    config = json.loads(json.dumps(DEPTH_ANYTHING_CONFIG))
    config['backbone_config'].update({field: value for field, value in changes if field in DEPTH_ANYTHING_FIELDS})
    config['patch_size'] = config['backbone_config']['patch_size']
    config['reassemble_hidden_size'] = config['backbone_config']['hidden_size']
    config.update({field: value for field, value in changes if field in ('fusion_hidden_size', 'head_hidden_size')})
    config['neck_hidden_sizes'] = widths
    return config


@settings(max_examples=EXAMPLES['config.json sizes'], **FUZZ)
@given(kind=st.sampled_from(['dpt', 'depth_anything']),
       changes=st.lists(st.tuples(st.sampled_from(DPT_FIELDS + ['head_hidden_size']), SIZE), max_size=4),
       widths=st.lists(SIZE, min_size=4, max_size=4))
def _config_sizes(workdir, kind, changes, widths):
    COUNTS['config.json sizes'] += 1
    path = workdir / 'config.json'
    path.write_text(json.dumps(_config(kind, changes, widths)))
    read = model_config_from_hf if kind == 'dpt' else depth_anything_config_from_hf
    try:
        model = read(read_config_json(path), path)
    except HFConfigError as err:
        assert str(path) in str(err), str(err)
        OUTCOMES['config.json sizes', 'refused'] += 1
        return
    OUTCOMES['config.json sizes', 'read'] += 1
    with torch.device('meta'):
        built = MODELS.build(model)
    assert sum(t.numel() for t in [*built.parameters(), *built.buffers()]) <= MAX_PARAMETERS


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp('fuzz_sizes')


@pytest.mark.slow
def test_converters_meet_damaged_state_dicts_with_checkpoint_errors():
    _converters()
    assert COUNTS['converters'] >= 0.9 * EXAMPLES['converters']
    assert OUTCOMES['converters', 'refused'] and OUTCOMES['converters', 'read']  # both outcomes were exercised


@pytest.mark.slow
def test_config_json_sizes_are_read_within_the_bound_or_refused(workdir):
    _config_sizes(workdir=workdir)
    assert COUNTS['config.json sizes'] >= 0.9 * EXAMPLES['config.json sizes']
    assert OUTCOMES['config.json sizes', 'refused'] and OUTCOMES['config.json sizes', 'read']
