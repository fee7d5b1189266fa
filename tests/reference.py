"""Reference models with non-trivial weights, written to real checkpoint files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


def perturb_(model: torch.nn.Module, std: float = 0.02) -> torch.nn.Module:
    """Add noise to every parameter so that LayerNorm weights, biases and tokens are not at their init."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * std)
    return model


def timm_reference(name: str, **kwargs) -> torch.nn.Module:
    timm = pytest.importorskip('timm')
    kwargs.setdefault('num_classes', 1000)  # some timm configs default to a headless model (DINO weights)
    return perturb_(timm.create_model(name, pretrained=False, **kwargs)).eval()


def meta_pair(name: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Our classifier of ``name`` and timm's, both at their defaults (the class count of the default weights),
    built on the meta device: shapes and counts without memory or time."""
    import zoo
    timm = pytest.importorskip('timm')
    with torch.device('meta'):
        return zoo.create_classifier(name), timm.create_model(name, pretrained=False)


def meta_pair_with_timms_keys(name: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """:func:`meta_pair` of ``name``, asserting that ours has timm's keys and shapes (timm's converted by
    ``vit_from_timm``) and timm's parameter count."""
    from zoo.weights.timm import vit_from_timm
    ours, reference = meta_pair(name)
    want = {k: tuple(v.shape) for k, v in vit_from_timm(reference.state_dict()).items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    return ours, reference


def assert_classifier_equals_timm(ours: torch.nn.Module, reference: torch.nn.Module, sizes, atol: float = 1e-4):
    """Logits, pre-logits (the pooled feature) and final features of ``ours`` equal timm's ``reference`` within
    ``atol`` on random images of each (h, w) of ``sizes``."""
    for hw in sizes:
        x = torch.randn(2, 3, *hw)
        with torch.no_grad():
            features, want_features = ours.forward_features(x), reference.forward_features(x)
            got = (ours.forward_head(features), ours.forward_head(features, pre_logits=True), features)
            want = (reference.forward_head(want_features), reference.forward_head(want_features, pre_logits=True),
                    want_features)
        for g, w in zip(got, want):
            assert g.shape == w.shape and (g - w).abs().max() <= atol, hw


def save_safetensors(model: torch.nn.Module, path) -> str:
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return str(path)


def classifier_from_timm_file(name: str, tmp_path, depth: int = 2, **small) -> tuple:
    """(ours, timm's, native size): timm's ``name`` (perturbed, ``depth`` blocks, 10 classes, ``small`` overrides)
    saved to a safetensors file, and our classifier of the name loading that file with ``pretrained=``."""
    import timm

    import zoo
    reference = timm_reference(name, depth=depth, num_classes=10, dynamic_img_size=True, **small)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier(name, depth=depth, num_classes=10, pretrained=path, **small).eval()
    return ours, reference, timm.models.get_pretrained_cfg(name).input_size[1:]


def assert_taps_equal_timm_intermediates(name: str, tmp_path, prefix: bool = False, **small) -> None:
    """Our backbone of ``name`` (3 blocks, taps 0 and 2) loading timm's perturbed file gives timm's
    ``forward_intermediates`` at two non-square sizes within 1e-4 (with ``prefix``: the prefix tokens too)."""
    import zoo
    reference = timm_reference(name, depth=3, num_classes=0, dynamic_img_size=True, **small)
    path = save_safetensors(reference, tmp_path / 'w.safetensors')
    backbone = zoo.create_backbone(name, depth=3, out_indices=(0, 2), pretrained=path, **small).eval()
    patch = backbone.patch_size
    for hw in ((4 * patch, 7 * patch), (9 * patch, 5 * patch)):
        x = torch.randn(1, 3, *hw)
        with torch.no_grad():
            maps, tokens = backbone.forward_taps(x)
            want = reference.forward_intermediates(x, indices=[0, 2], intermediates_only=True, norm=False,
                                                   return_prefix_tokens=prefix)
        for i, got in enumerate(maps):
            spatial = want[i][0] if prefix else want[i]
            assert got.shape == spatial.shape == (1, backbone.embed_dim, hw[0] // patch, hw[1] // patch)
            assert (got - spatial).abs().max() <= 1e-4
            if prefix:
                assert (tokens[i] - want[i][1]).abs().max() <= 1e-4


#: what each folder of the shared real data is, for the reason a test is skipped without it
SHARED_DATASETS = {'camvid': 'CamVid (SegNet version)', 'depth-7scenes': 'Microsoft 7-Scenes (one kitchen sequence)',
                   'ade20k-samples': 'ADE20K samples (3 validation pairs)'}
#: the small pictures committed in tests/samples/ (tests/samples/README.md says where they come from)
SAMPLES = Path(__file__).resolve().parent / 'samples'


def shared_data_root() -> Path:
    """The shared real-data folder: ``ZOO_DATA`` if set, else ``../shared/data`` beside the project folder."""
    return Path(os.environ.get('ZOO_DATA', Path(__file__).resolve().parents[2] / 'shared' / 'data'))


def shared_data(*parts):
    """A path under the shared real-data folder (``ZOO_DATA`` overrides ``../shared/data``); skips, saying which
    dataset is missing and how to get it, if the path is absent. Every test reading real data comes through here."""
    if not parts:
        raise TypeError("shared_data() needs the path inside the data folder (e.g. shared_data('camvid', 'images', "
                        "'val')): the folder alone exists even where a dataset is missing, so it cannot skip")
    path = shared_data_root().joinpath(*parts)
    if not path.exists():
        dataset = SHARED_DATASETS.get(parts[0], parts[0])
        pytest.skip(f"needs {dataset}: {path} is not available (ZOO_DATA={os.environ.get('ZOO_DATA', 'unset')}; "
                    f"get it with `python tools/fetch_datasets.py DIR --only {parts[0]}` and set ZOO_DATA=DIR)")
    return path


def sample_street() -> Path:
    """A real street picture committed with the tests (a CamVid frame at 240x180, JPEG, ~10 KB): for tests that
    need a real-looking image, not a dataset."""
    return SAMPLES / 'camvid_0016E5_07959_240x180.jpg'


def tiny_dpt(task: str = 'seg', **overrides) -> dict:
    """Config of a small DPT model (4-block ViT-Ti) for fast tests."""
    backbone = dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, out_indices=(0, 1, 2, 3))
    neck = dict(type='DPTNeck', hidden_channels=(16, 32, 64, 64), fusion_channels=32)
    if task == 'seg':
        cfg = dict(type='Segmentor', backbone=backbone, neck=neck,
                   decode_head=dict(type='DPTSegHead', num_classes=11, in_channels=32),
                   auxiliary_head=dict(type='DPTSegHead', num_classes=11, in_channels=32, upsample=False))
    else:
        cfg = dict(type='DepthEstimator', backbone=backbone, neck=neck,
                   decode_head=dict(type='DPTDepthHead', in_channels=32, mode=task, max_depth=10.0))
    return {**cfg, **overrides}
