"""The EoMT authors' own checkpoints (tue-mps/eomt, ``network.*`` keys; :mod:`heads.layouts.eomt_authors`) load into
this project's EoMT with the authors' outputs: tests/reference_data/eomt_authors.pt holds small seeded models of their
``models.eomt.EoMT`` in the layout they publish and their code's per-layer mask and class logits (made by
tests/reference_data/eomt_authors.py at their commit 7bd19dd).

DINOv2 through timm at a non-square native size; DINOv3 through transformers at its square size and a non-square
one; the DINOv3 delta files (their releases) added to DINOv3's weights by ``tools/convert_weights.py eomt-deltas``
as their LightningModule adds them, and refused when loaded as weights. Each with every masked block masked
(probabilities 1: every layer's predictions compared) and annealed (0, as the files are saved: the final ones).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from heads.layouts.eomt_authors import eomt_from_deltas
from heads.models.task_checkpoint import load_task_checkpoint, task_checkpoint_layout
from heads.registry import MODELS
from zoo.registry import IMAGENET_MEAN, IMAGENET_STD
from zoo.weights import CheckpointLayoutError

REFERENCE = Path(__file__).resolve().parents[1] / 'reference_data' / 'eomt_authors.pt'
SIZES = dict(embed_dim=32, depth=4, num_heads=2, patch_size=16, tap_norm=True)
HEAD = dict(type='EoMT', num_classes=5, num_queries=6, num_blocks=2, backbone_norm=True)
#: the authors' encoders as this project's backbones: timm's DINOv2-L with registers at the test's sizes, and
#: transformers' DINOv3ViTConfig defaults (q/v biases, 1e-5 norms, rotary positions of period base 100)
BACKBONES = {
    'dinov2': dict(type='ZooBackbone', name='vit_large_patch14_reg4_dinov2', img_size=(64, 96), **SIZES),
    'dinov3': dict(type='ZooBackbone', name='vit_small_patch16_dinov3', img_size=64, mlp_ratio=2.0, reg_tokens=4,
                   norm_eps=1e-5, qkv_bias=True, key_bias=False, proj_bias=True, pos_embed='none',
                   rope=dict(kind='dinov3', base=100.0, normalize='separate', rescale=2.0), **SIZES),
}


@pytest.fixture(scope='module')
def reference():
    return torch.load(REFERENCE, weights_only=True)


def build(kind: str):
    return MODELS.build(dict(HEAD, backbone=BACKBONES[kind])).eval()


def assert_authors_logits(model, x: torch.Tensor, expected: dict) -> None:
    """Mask and class logits of every layer (probabilities 1) and the final ones (0) equal the authors' within 1e-4
    of their scale; ``x``: the authors' input (pixels in 0..1, which they normalise inside the model)."""
    x = (x - torch.tensor(IMAGENET_MEAN)[:, None, None]) / torch.tensor(IMAGENET_STD)[:, None, None]
    for setting in ('1.0', '0.0'):
        model.set_mask_probabilities([float(setting)] * model.num_blocks)
        with torch.no_grad():
            classes, masks, aux = model.forward_logits(x)
        layers = [*aux, (classes, masks)] if setting == '1.0' else [(classes, masks)]
        want = expected[setting]
        pairs = list(zip(want['classes'][-len(layers):], want['masks'][-len(layers):]))
        assert len(layers) == (len(want['classes']) if setting == '1.0' else 1)
        for (got_c, got_m), (want_c, want_m) in zip(layers, pairs):
            for got, wanted in ((got_c, want_c), (got_m, want_m)):
                assert got.shape == wanted.shape
                assert (got - wanted).abs().max() <= 1e-4 * wanted.abs().max(), setting


@pytest.mark.parametrize('kind', ['dinov2', 'dinov3'])
def test_the_authors_checkpoint_gives_their_logits(reference, kind, tmp_path):
    case = reference[kind]
    path = tmp_path / 'pytorch_model.bin'
    torch.save(case['state'], path)  # as their model zoo publishes it
    model = build(kind)
    assert task_checkpoint_layout(case['state'], model) == 'EoMT authors'
    report = load_task_checkpoint(model, path)
    assert report.format == 'EoMT authors' and not report.missing and not report.unexpected
    assert model.attn_mask_probs.tolist() == [0.0, 0.0]  # saved annealed
    for size, x in case['inputs'].items():
        assert_authors_logits(model, x, case['outputs'][size])


def test_the_authors_dinov3_deltas_added_to_dinov3_give_their_logits(reference, tmp_path):
    """Their delta file plus DINOv3's weights (transformers' layout, as its folder holds them), added by the tool
    as their LightningModule adds them, gives the outputs of their model loaded their way."""
    from safetensors.torch import save_file
    case = reference['dinov3_deltas']
    deltas, dinov3, out = tmp_path / 'pytorch_model.bin', tmp_path / 'model.safetensors', tmp_path / 'eomt.safetensors'
    torch.save(case['state'], deltas)
    save_file({k: v.contiguous() for k, v in case['dinov3'].items()}, str(dinov3))
    import convert_weights
    convert_weights.main(['eomt-deltas', str(deltas), str(dinov3), str(out)])
    assert deltas.exists() and dinov3.exists()  # inputs untouched
    model = build('dinov3')
    load_task_checkpoint(model, out)
    assert_authors_logits(model, case['inputs']['64x64'], case['outputs']['64x64'])


def test_a_delta_file_loaded_as_weights_is_refused_before_anything_loads(reference):
    model = build('dinov3')
    before = {k: v.clone() for k, v in model.state_dict().items()}
    refusal = r"network\.attn_mask_probs.*deltas.*convert_weights\.py eomt-deltas"
    with pytest.raises(CheckpointLayoutError, match=refusal):
        load_task_checkpoint(model, reference['dinov3_deltas']['state'], name='deltas.bin')
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_deltas_need_every_encoder_weight_of_the_dinov3_file(reference):
    case = reference['dinov3_deltas']
    dinov3 = {k: v for k, v in case['dinov3'].items() if k != 'layer.1.norm2.weight'}
    with pytest.raises(CheckpointLayoutError, match=r"'layer\.1\.norm2\.weight'.*missing in DINOv3's weights"):
        eomt_from_deltas(case['state'], dinov3)
    wrong = dict(case['dinov3'], **{'norm.weight': torch.ones(8)})
    with pytest.raises(CheckpointLayoutError, match=r"'norm\.weight'.*of shape \(8,\), not \(32,\)"):
        eomt_from_deltas(case['state'], wrong)
