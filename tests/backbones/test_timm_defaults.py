"""Issue 36 item 9: every registered name builds, by default, what timm's ``pretrained_cfg`` of that name describes
(its default weights): class count (0 = no head), input size, mean and std; so timm's own file of a name loads into
``zoo.create_classifier(name)`` as it is.

timm's pretrained_cfg is read without downloading anything; our models are built on the meta device (no memory)."""
import pytest
import timm
import torch
from safetensors.torch import save_file

import zoo
from zoo.registry import get_variant

#: Registered names timm does not have, and why.
NO_TIMM_COUNTERPART = {name: "CvT is not in timm; its reference is transformers' CvtForImageClassification "
                             "(microsoft/cvt-*: 224 or 384 px, ImageNet mean/std, 1000 classes)"
                       for name in zoo.list_backbones('cvt_*')}


def timm_defaults(name: str) -> dict:
    cfg = timm.models.get_pretrained_cfg(name).to_dict()
    return dict(num_classes=cfg['num_classes'], input_size=tuple(cfg['input_size']), mean=tuple(cfg['mean']),
                std=tuple(cfg['std']))


def test_names_without_a_timm_counterpart_are_exactly_the_listed_ones():
    missing = [name for name in zoo.list_backbones() if timm.models.get_pretrained_cfg(name) is None]
    assert missing == sorted(NO_TIMM_COUNTERPART)
    for name in NO_TIMM_COUNTERPART:  # what the reason claims
        variant = get_variant(name)
        assert variant.num_classes == 1000 and variant.mean == (0.485, 0.456, 0.406)
        assert variant.input_size in ((224, 224), (384, 384))


@pytest.mark.parametrize('name', [n for n in zoo.list_backbones() if n not in NO_TIMM_COUNTERPART])
def test_create_classifier_defaults_equal_timms_pretrained_cfg(name):
    want = timm_defaults(name)
    with torch.device('meta'):
        model = zoo.create_classifier(name)
    cfg = model.pretrained_cfg
    got = dict(num_classes=model.num_classes, input_size=(3, *cfg['input_size']), mean=tuple(cfg['mean']),
               std=tuple(cfg['std']))
    assert got == want
    assert cfg['num_classes'] == want['num_classes']
    if want['num_classes'] == 0:  # no head: the features are the output
        assert not any(k.startswith(('head.', 'head_dist.')) for k in model.state_dict())


def test_timms_headless_dinov2_file_loads_into_the_default_classifier(tmp_path):
    small = dict(img_size=56, depth=2)
    ref = timm.create_model('vit_small_patch14_dinov2', pretrained=False, **small).eval()  # timm's default: no head
    assert ref.num_classes == 0
    path = tmp_path / 'vit_small_patch14_dinov2.safetensors'
    save_file(ref.state_dict(), path)
    ours = zoo.create_classifier('vit_small_patch14_dinov2', pretrained=path, **small).eval()
    x = torch.randn(2, 3, 56, 56)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
    assert zoo.create_classifier('vit_small_patch14_dinov2', num_classes=10, **small).head.out_features == 10
