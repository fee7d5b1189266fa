"""Checkpoint files in every supported container, safe loading, and errors that say what is wrong."""
import pickle

import pytest
import torch

import zoo
from zoo.weights import CheckpointError, CheckpointMismatchError, UnsafeCheckpointError

from ..reference import perturb_, save_safetensors, timm_reference

timm = pytest.importorskip('timm')
NAME = 'vit_tiny_patch16_224'


@pytest.fixture(scope='module')
def reference():
    torch.manual_seed(0)
    return timm_reference(NAME)


@pytest.fixture
def image():
    return torch.randn(1, 3, 224, 224)


@pytest.mark.parametrize('container', ['safetensors', 'pth', 'bin', 'wrapped_pt', 'ddp_pth', 'hf_folder'])
def test_every_file_container_loads_the_same_weights(container, reference, image, tmp_path):
    state = {k: v.clone() for k, v in reference.state_dict().items()}
    if container == 'safetensors':
        path = save_safetensors(reference, tmp_path / 'w.safetensors')
    elif container == 'hf_folder':
        save_safetensors(reference, tmp_path / 'model.safetensors')
        path = tmp_path
    else:
        names = {'pth': 'w.pth', 'bin': 'pytorch_model.bin', 'wrapped_pt': 'w.pt', 'ddp_pth': 'w.pth'}
        path = tmp_path / names[container]
        payload = {'wrapped_pt': {'model': state, 'epoch': 3}, 'ddp_pth': {f'module.{k}': v for k, v in state.items()}}
        torch.save(payload.get(container, state), path)
    model = zoo.create_classifier(NAME, pretrained=path).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(image), reference(image), atol=1e-4, rtol=1e-4)


def test_our_own_layout_round_trips(reference, image):
    model = zoo.create_classifier(NAME, pretrained=reference.state_dict()).eval()
    again = zoo.create_classifier(NAME).eval()
    report = zoo.load_pretrained(again, model.state_dict())
    assert report.format == 'zoo'
    with torch.no_grad():
        torch.testing.assert_close(again(image), model(image))


def test_classifier_checkpoint_into_backbone_drops_the_head(reference):
    backbone = zoo.create_backbone(NAME)
    report = zoo.load_pretrained(backbone, reference.state_dict())
    assert sorted(report.dropped) == ['head.bias', 'head.weight', 'norm.bias', 'norm.weight']
    torch.testing.assert_close(backbone.blocks[0].attn.qkv.weight, reference.blocks[0].attn.qkv.weight)


def test_other_class_count_reinitialises_the_head_only(reference):
    model = zoo.create_classifier(NAME, num_classes=10)
    report = zoo.load_pretrained(model, reference.state_dict())
    assert sorted(report.reinitialized) == ['head.bias', 'head.weight'] and model.head.out_features == 10
    torch.testing.assert_close(model.pos_embed.weight, reference.pos_embed)


def test_position_table_is_resized_like_timm_checkpoint_filter(reference, tmp_path):
    """Our 384 model from a 224 checkpoint equals timm's 384 model given the same file through its filter."""
    from timm.models.vision_transformer import checkpoint_filter_fn
    ref384 = timm.create_model('vit_tiny_patch16_384', pretrained=False).eval()
    ref384.load_state_dict(checkpoint_filter_fn(reference.state_dict(), ref384))
    weights = save_safetensors(reference, tmp_path / 'w.safetensors')
    ours = zoo.create_classifier('vit_tiny_patch16_384', pretrained=weights)
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(x), ref384(x), atol=1e-4, rtol=1e-4)


def test_checkpoint_that_does_not_fit_names_the_keys(reference):
    state = dict(reference.state_dict())
    del state['blocks.3.mlp.fc1.weight']
    state['blocks.0.extra.weight'] = torch.zeros(1)
    with pytest.raises(CheckpointMismatchError) as err:
        zoo.create_classifier(NAME, pretrained=state)
    assert 'blocks.3.mlp.fc1.weight' in str(err.value) and 'blocks.0.extra.weight' in str(err.value)
    small = perturb_(timm.create_model('vit_small_patch16_224', pretrained=False)).state_dict()
    expected = r'blocks\.0\.attn\.qkv\.weight \(1152, 384\) vs model \(576, 192\)'
    with pytest.raises(CheckpointMismatchError, match=expected):
        zoo.create_classifier(NAME, pretrained=small)


def test_non_strict_load_reports_what_did_not_fit(reference):
    state = dict(reference.state_dict())
    del state['blocks.3.mlp.fc1.weight']
    report = zoo.load_pretrained(zoo.create_classifier(NAME), state, strict=False)
    assert report.missing == ['blocks.3.mlp.fc1.weight']


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, 'w'))


@pytest.mark.filterwarnings('ignore:Detected pickle protocol')
def test_pickle_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / 'code_ran'
    path = tmp_path / 'evil.pth'
    with open(path, 'wb') as f:
        pickle.dump({'weights': _RunsCode(str(marker))}, f)
    torch.save({'w': torch.zeros(1), 'payload': _RunsCode(str(marker))}, tmp_path / 'evil2.pth')
    marker.unlink(missing_ok=True)
    for bad in (path, tmp_path / 'evil2.pth'):
        with pytest.raises(UnsafeCheckpointError, match='could run arbitrary code'):
            zoo.create_classifier(NAME, pretrained=bad)
    assert not marker.exists()


def test_corrupt_truncated_and_missing_files_name_the_file(reference, tmp_path):
    full = save_safetensors(reference, tmp_path / 'w.safetensors')
    data = open(full, 'rb').read()
    (tmp_path / 'cut.safetensors').write_bytes(data[: len(data) // 3])
    with pytest.raises(CheckpointError, match='cut.safetensors'):
        zoo.create_classifier(NAME, pretrained=tmp_path / 'cut.safetensors')
    torch.save(reference.state_dict(), tmp_path / 'w.pth')
    (tmp_path / 'cut.pth').write_bytes((tmp_path / 'w.pth').read_bytes()[:1000])
    with pytest.raises(CheckpointError, match='cut.pth'):
        zoo.create_classifier(NAME, pretrained=tmp_path / 'cut.pth')
    with pytest.raises(FileNotFoundError, match='nowhere.pth'):
        zoo.create_classifier(NAME, pretrained=tmp_path / 'nowhere.pth')
    empty = tmp_path / 'empty_folder'
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match='model.safetensors, pytorch_model.bin'):
        zoo.create_classifier(NAME, pretrained=empty)


def test_unknown_name_lists_close_matches_and_known_names():
    with pytest.raises(zoo.UnknownModelError) as err:
        zoo.create_backbone('vit_base_patch16_225')
    message = str(err.value)
    assert 'did you mean vit_base_patch16_224' in message and 'deit_tiny_patch16_224' in message
    with pytest.raises(KeyError):  # also catchable as the KeyError it is
        zoo.create_classifier('resnet50')


def test_unknown_option_lists_the_accepted_ones():
    with pytest.raises(TypeError, match=r"does not accept \['patch_sise'\].*'patch_size'"):
        zoo.create_backbone('vit_tiny_patch16_224', patch_sise=8)


def test_bad_input_sizes_and_channels_are_explained():
    model = zoo.create_backbone('vit_tiny_patch16_224')
    with pytest.raises(ValueError, match=r'230x224 cannot be tiled by 16x16 patches.*224x224'):
        model(torch.randn(1, 3, 230, 224))
    with pytest.raises(ValueError, match=r'expected images of shape \(B, 3, H, W\), got \(1, 1, 224, 224\)'):
        model(torch.randn(1, 1, 224, 224))
    with pytest.raises(ValueError, match='out_indices must be distinct increasing block indices in'):
        zoo.create_backbone('vit_tiny_patch16_224', out_indices=(2, 12))


def test_list_backbones_filters_by_pattern():
    assert zoo.list_backbones('deit_*_distilled_*') == ['deit_base_distilled_patch16_224',
                                                        'deit_base_distilled_patch16_384',
                                                        'deit_small_distilled_patch16_224',
                                                        'deit_tiny_distilled_patch16_224']
    assert 'vit_large_patch16_384' in zoo.list_backbones()
