"""Issue 36: the layout converters (DINOv2, Swin, EVA/RoPE, PiT, LeViT) meet damaged or foreign files with a
zoo.weights.CheckpointError naming the file, the key and the fix, never an IndexError / KeyError / ValueError from
inside; and timm's PiT saved at a non-square size loads (its '1 d h w' table carries the grid)."""
import pytest
import timm
import torch
from safetensors.torch import load_file, save_file

import zoo
from zoo.weights import CheckpointError, CheckpointLayoutError, CheckpointMismatchError

SWIN = dict(depths=(1, 1, 1, 1), embed_dim=16, num_heads=(1, 1, 1, 1), img_size=56)
DINO = dict(depth=1, img_size=28, embed_dim=32, num_heads=2)


def saved(state: dict, path) -> str:
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return str(path)


def refused(path: str, key: str, build, fix: str, error=CheckpointLayoutError) -> str:
    """``build(path)``'s error, which must name the file, the key and (a phrase of) the fix."""
    with pytest.raises(error) as caught:
        build(path)
    message = str(caught.value)
    assert path in message and repr(key) in message and fix in message, message
    return message


def test_timm_pit_saved_at_a_non_square_size_loads_at_its_size_and_resized(tmp_path):
    ref = timm.create_model('pit_ti_224', img_size=(256, 320)).eval()  # table '1 d 31 39': 1209 rows, no square
    path = saved(ref.state_dict(), tmp_path / 'pit.safetensors')
    same = zoo.create_classifier('pit_ti_224', pretrained=path, img_size=(256, 320)).eval()
    x = torch.randn(1, 3, 256, 320)
    with torch.no_grad():
        torch.testing.assert_close(same(x), ref(x))
    resized = zoo.create_classifier('pit_ti_224', pretrained=path).eval()  # 224: the table resampled from 31x39
    expected = torch.nn.functional.interpolate(ref.pos_embed.detach(), size=(27, 27), mode='bicubic',
                                               align_corners=False, antialias=True)
    torch.testing.assert_close(resized.pos_embed.weight.detach(), expected.flatten(2).transpose(1, 2))


def test_rope_freqs_of_the_wrong_rank(tmp_path):
    ref = timm.create_model('vit_small_patch16_rope_mixed_224', depth=1, img_size=32, embed_dim=32, num_heads=2)
    state = ref.state_dict()
    state['rope.freqs'] = state['rope.freqs'].flatten()
    path = saved(state, tmp_path / 'rope.safetensors')
    refused(path, 'rope.freqs', lambda p: zoo.create_classifier('vit_small_patch16_rope_mixed_224', pretrained=p,
                                                                depth=1, img_size=32, embed_dim=32, num_heads=2),
            "re-save the checkpoint from such a model")


def test_swin_bias_table_of_the_wrong_length(tmp_path):
    state = timm.create_model('swin_tiny_patch4_window7_224', window_size=7, **SWIN).state_dict()
    key = 'layers.0.blocks.0.attn.relative_position_bias_table'
    state[key] = torch.cat([state[key], state[key][:1]])  # 170 rows: no (2w-1)^2
    path = saved(state, tmp_path / 'swin.safetensors')
    refused(path, key, lambda p: zoo.create_backbone('swin_tiny_patch4_window7_224', pretrained=p, window=7, **SWIN),
            "use the checkpoint saved with this model's window")


def test_transformers_dinov2_folder_missing_a_key(tmp_path):
    transformers = pytest.importorskip('transformers')
    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                                       patch_size=14, intermediate_size=64)
    transformers.Dinov2Model(config).save_pretrained(tmp_path)
    weights = tmp_path / 'model.safetensors'
    state = load_file(str(weights))
    del state['encoder.layer.0.attention.attention.key.weight']
    saved(state, weights)
    refused(str(tmp_path), 'encoder.layer.0.attention.attention.key.weight',
            lambda p: zoo.create_backbone('vit_small_patch14_dinov2', pretrained=p, out_indices=(0,), **DINO),
            'save the model again with save_pretrained')



def test_transformers_dpt_folder_missing_a_key(tmp_path):
    """A DPT folder whose weights lack one layer's key projection: the error names the folder, the key and the fix
    (before: a bare KeyError 'key' from the converter)."""
    import heads

    from ..layouts.test_dpt_hf_parity import save_hf
    save_hf('DPTForSemanticSegmentation', tmp_path)
    weights = tmp_path / 'model.safetensors'
    state = load_file(str(weights))
    del state['dpt.encoder.layer.1.attention.attention.key.bias']
    saved(state, weights)
    refused(str(tmp_path), 'dpt.encoder.layer.1.attention.attention.key.bias', heads.from_pretrained_hf,
            "transformers' DPT model saves query, key and value")

def official_register_state() -> dict:
    """timm's DINOv2-with-registers weights in the official layout (CLS row in the table, register_tokens)."""
    state = timm.create_model('vit_small_patch14_reg4_dinov2', **DINO).state_dict()
    pos = state.pop('pos_embed')
    state['pos_embed'] = torch.cat([torch.zeros(1, 1, pos.shape[2]), pos], dim=1)
    state['register_tokens'] = state.pop('reg_token')
    return state


def test_dinov2_register_tokens_without_cls_token(tmp_path):
    state = official_register_state()
    loaded = zoo.create_backbone('vit_small_patch14_reg4_dinov2', pretrained=saved(state, tmp_path / 'ok.pth.st'),
                                 **DINO)
    assert loaded is not None  # the complete file loads
    del state['cls_token']
    path = saved(state, tmp_path / 'official.safetensors')
    refused(path, 'cls_token', lambda p: zoo.create_backbone('vit_small_patch14_reg4_dinov2', pretrained=p, **DINO),
            'missing: a checkpoint with register_tokens keeps its CLS token')


LEVIT_TABLE = 'stages.0.blocks.0.attn.attention_biases'


@pytest.mark.parametrize('damage,fix', [
    (lambda s: s.pop(LEVIT_TABLE), "Use the complete checkpoint (timm's LeViT layout"),
    (lambda s: s.update({LEVIT_TABLE: torch.zeros(3)}), 'use the checkpoint as timm saved it'),
], ids=['missing', 'rank'])
def test_levit_file_with_a_table_missing_or_of_another_rank(tmp_path, damage, fix):
    state = timm.create_model('levit_128s', depth=(1, 1, 1)).state_dict()
    damage(state)
    path = saved(state, tmp_path / 'levit.safetensors')
    refused(path, LEVIT_TABLE, lambda p: zoo.create_classifier('levit_128s', pretrained=p, depths=(1, 1, 1)), fix)


def test_pit_cls_token_of_the_wrong_rank(tmp_path):
    state = timm.create_model('pit_ti_224').state_dict()
    state['cls_token'] = state['cls_token'].flatten()
    path = saved(state, tmp_path / 'pit.safetensors')
    refused(path, 'cls_token', lambda p: zoo.create_classifier('pit_ti_224', pretrained=p),
            'use the checkpoint as timm saved it')


@pytest.mark.parametrize('name,options,key', [
    ('swin_tiny_patch4_window7_224', dict(SWIN, window=7), 'layers.0.blocks.0.attn.pos_bias.table'),
    ('levit_128s', dict(depths=(1, 1, 1)), 'stages.0.blocks.0.attn.pos_bias.table'),
])
def test_position_tables_of_another_rank_in_our_layout(tmp_path, name, options, key):
    """Our own layout, a table flattened: the model's resampling refuses it by key instead of indexing into it."""
    state = zoo.create_backbone(name, **options).state_dict()
    state[key] = state[key].flatten()
    path = saved(state, tmp_path / 'ours.safetensors')
    with pytest.raises(CheckpointError) as caught:
        zoo.create_backbone(name, pretrained=path, **options)
    assert path in str(caught.value) and key in str(caught.value)
    assert isinstance(caught.value, (CheckpointMismatchError, CheckpointLayoutError))


# ------------------------------------------------------------------------------ transformers config.json sizes
DPT_CONFIG = dict(model_type='dpt', architectures=['DPTForDepthEstimation'], hidden_size=64, num_hidden_layers=4,
                  num_attention_heads=4, intermediate_size=128, image_size=64, patch_size=16,
                  backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32)
DEPTH_ANYTHING_CONFIG = dict(model_type='depth_anything', reassemble_hidden_size=32, neck_hidden_sizes=[8, 8, 8, 8],
                             fusion_hidden_size=8, head_hidden_size=8, patch_size=14,
                             backbone_config=dict(model_type='dinov2', hidden_size=32, num_attention_heads=2,
                                                  num_hidden_layers=4, image_size=56, patch_size=14,
                                                  out_indices=[1, 2, 3, 4]))


def read_back(tmp_path, config: dict) -> dict:
    """``config`` written as a folder's config.json and read as heads.from_pretrained_hf reads it."""
    import json

    from heads.hf.config import read_config_json
    from heads.hf.depth_anything import depth_anything_config_from_hf
    from heads.hf.dpt import model_config_from_hf
    path = tmp_path / 'config.json'
    path.write_text(json.dumps(config))
    read = depth_anything_config_from_hf if config['model_type'] == 'depth_anything' else model_config_from_hf
    return read(read_config_json(path), path)


@pytest.mark.parametrize('config,fields,limit', [
    (dict(DPT_CONFIG, image_size=1 << 20), 'image_size / patch_size', '65536 patches'),
    (dict(DEPTH_ANYTHING_CONFIG, backbone_config=dict(DEPTH_ANYTHING_CONFIG['backbone_config'], image_size=1 << 20)),
     'image_size / patch_size', '65536 patches'),
    (dict(DPT_CONFIG, fusion_hidden_size=1 << 20), 'fusion_hidden_size = 1048576', 'limit of 4,294,967,296'),
    (dict(DPT_CONFIG, hidden_size=1 << 16, num_attention_heads=1, intermediate_size=1 << 20),
     'intermediate_size = 1048576', 'limit of 4,294,967,296'),
    (dict(DPT_CONFIG, num_hidden_layers=1 << 20), 'num_hidden_layers = 1048576', 'limit of 256'),
    (dict(DEPTH_ANYTHING_CONFIG, fusion_hidden_size=1 << 18), 'fusion_hidden_size = 262144', 'limit of 4,294,967,296'),
], ids=['dpt-image-size', 'depth-anything-image-size', 'fusion', 'mlp', 'layers', 'depth-anything-fusion'])
def test_config_json_describing_a_model_beyond_the_bounds_is_refused_before_allocating(tmp_path, config, fields,
                                                                                         limit):
    from heads.hf.config import HFConfigError
    with pytest.raises(HFConfigError) as caught:
        read_back(tmp_path, config)
    message = str(caught.value)
    assert str(tmp_path / 'config.json') in message and fields in message and limit in message, message


def test_config_json_of_a_real_size_is_accepted(tmp_path):
    dpt_large = dict(DPT_CONFIG, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                     image_size=384, backbone_out_indices=[5, 11, 17, 23], neck_hidden_sizes=[256, 512, 1024, 1024],
                     fusion_hidden_size=256)
    assert read_back(tmp_path, dpt_large)['backbone']['embed_dim'] == 1024
    assert read_back(tmp_path, DEPTH_ANYTHING_CONFIG)['type'] == 'DepthEstimator'
