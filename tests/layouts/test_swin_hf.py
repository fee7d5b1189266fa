"""transformers' Swin layout (``SwinForImageClassification``, ``SwinBackbone``, ``Swinv2ForImageClassification``)
-> ours through :func:`zoo.weights.swin.swin_from_hf`, loaded from save_pretrained folders by ``pretrained=``.

transformers' Swin keeps state between calls (a call on a map no larger than the window turns that block's shift
off for good) and its ``SwinBackbone`` pads a map to window multiples before the cyclic shift, never shrinking the
window (as mmseg); timm, and so this project's default, shift then pad and shrink. They agree wherever each stage's
map is a multiple of the window and larger than it, or, for the classifier, at the size it was built for: a fresh
reference per size, at those sizes, is compared here."""
import pytest
import torch

import zoo
from zoo.weights import CheckpointLayoutError
from zoo.weights.swin import swin_from_hf

from ..reference import perturb_

transformers = pytest.importorskip('transformers')

SMALL = dict(embed_dim=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4], window_size=4, image_size=128)
OURS = dict(img_size=128, embed_dim=32, depths=(2, 2, 2, 2), num_heads=(1, 2, 2, 4), window=4)
SIZES = [(128, 128), (256, 384)]  # every stage map a multiple of the window 4 (see the module docstring)


def saved(model, tmp_path):
    torch.manual_seed(0)
    perturb_(model).eval().save_pretrained(tmp_path)
    return model, str(tmp_path)


def test_swin_classifier_folder_loads_with_equal_logits(tmp_path):
    ref, folder = saved(transformers.SwinForImageClassification(transformers.SwinConfig(**SMALL, num_labels=10)),
                        tmp_path)
    ours = zoo.create_classifier('swin_tiny_patch4_window7_224', num_classes=10, pretrained=folder, **OURS).eval()
    for size in SIZES:
        fresh = transformers.SwinForImageClassification.from_pretrained(folder, image_size=size).eval()
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            want = fresh(pixel_values=x).logits
            assert (ours(x) - want).abs().max() <= 1e-4 * want.abs().max(), size


def test_swin_backbone_stage_norms_become_out_norms(tmp_path):
    config = transformers.SwinConfig(**SMALL, out_features=['stage1', 'stage2', 'stage3', 'stage4'])
    ref, folder = saved(transformers.SwinBackbone(config), tmp_path)
    ours = zoo.create_backbone('swin_tiny_patch4_window7_224', pretrained=folder, **OURS).eval()
    x = torch.randn(1, 3, 256, 384)
    with torch.no_grad():
        want = ref(pixel_values=x).feature_maps
        got = ours(x)
    assert len(got) == len(want) == 4
    for mine, theirs in zip(got, want):
        assert (mine - theirs).abs().max() <= 1e-4 * theirs.abs().max()


def test_swinv2_classifier_folder_loads_with_equal_logits(tmp_path):
    ref, folder = saved(transformers.Swinv2ForImageClassification(transformers.Swinv2Config(**SMALL, num_labels=10)),
                        tmp_path)
    ours = zoo.create_classifier('swinv2_tiny_window8_256', num_classes=10, pretrained=folder, **OURS).eval()
    x = torch.randn(2, 3, 128, 128)
    with torch.no_grad():
        want = ref(pixel_values=x).logits
        assert (ours(x) - want).abs().max() <= 1e-4 * want.abs().max()


def test_a_missing_key_projection_is_named():
    state = transformers.SwinModel(transformers.SwinConfig(**SMALL)).state_dict()
    key = next(k for k in state if k.endswith('blocks.0.attention.k_proj.weight'))
    del state[key]
    with pytest.raises(CheckpointLayoutError, match=r'layers\.0\.blocks\.0\.attention\.self\.key\.weight'):
        swin_from_hf(state)


@pytest.mark.parametrize('size', [(128, 128), (160, 200), (96, 64)])
def test_mmseg_window_layout_equals_swin_backbone_at_padded_sizes(size, tmp_path):
    """``window_layout='mmseg'``: pad before the roll, never shrink: transformers' SwinBackbone (``always_partition``)
    at sizes whose maps need padding or are smaller than the window; timm's layout differs there (the test can fail)."""
    config = transformers.SwinConfig(**SMALL, out_features=['stage1', 'stage2', 'stage3', 'stage4'])
    ref, folder = saved(transformers.SwinBackbone(config), tmp_path)
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        want = ref(pixel_values=x).feature_maps
        for layout, equal in (('mmseg', True), ('timm', False)):
            ours = zoo.create_backbone('swin_tiny_patch4_window7_224', pretrained=folder, window_layout=layout,
                                       **OURS).eval()
            close = [(m - t).abs().max() <= 1e-4 * t.abs().max() for m, t in zip(ours(x), want)]
            assert all(close) == equal, (layout, size, close)
