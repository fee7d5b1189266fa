"""transformers' SigLIP 2 NaFlex tower (``Siglip2VisionModel``) saved with save_pretrained loads into the NaFlex
family (:func:`zoo.weights.siglip.siglip2_from_hf`): the same patches (ours packed by
:func:`zoo.backbones.naflex_batch.patchify`) give the same tokens and pooled features, a batch of mixed sizes
included."""
import pytest
import torch

import zoo
from zoo.backbones.naflex_batch import patchify
from zoo.weights import CheckpointLayoutError
from zoo.weights.siglip import siglip2_from_hf

from ..reference import perturb_

transformers = pytest.importorskip('transformers')
SMALL = dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4, num_patches=256,
             patch_size=16)


def test_siglip2_folder_gives_timms_naflex_the_same_tokens_and_pooled_features(tmp_path):
    torch.manual_seed(0)
    ref = perturb_(transformers.Siglip2VisionModel(transformers.Siglip2VisionConfig(**SMALL))).eval()
    ref.save_pretrained(tmp_path)
    ours = zoo.create_classifier('naflexvit_base_patch16_siglip', depth=2, embed_dim=96, num_heads=4, mlp_ratio=2,
                                 num_classes=0, pretrained=str(tmp_path)).eval()
    images = [torch.randn(3, 96, 160), torch.randn(3, 64, 48), torch.randn(3, 128, 128)]
    batch = patchify(images, 16)
    with torch.no_grad():
        want = ref(pixel_values=batch.patches, pixel_attention_mask=batch.valid.long(),
                   spatial_shapes=torch.tensor(batch.grids))
        tokens = ours.forward_features(batch)
        pooled = ours(batch)
    valid = batch.valid
    scale = want.last_hidden_state[valid].abs().max()
    assert (tokens.tokens[valid] - want.last_hidden_state[valid]).abs().max() <= 1e-4 * scale
    assert (pooled - want.pooler_output).abs().max() <= 1e-4 * want.pooler_output.abs().max()


def test_a_table_of_no_square_grid_is_named():
    state = transformers.Siglip2VisionModel(transformers.Siglip2VisionConfig(**SMALL)).state_dict()
    key = next(k for k in state if k.endswith('position_embedding.weight'))
    state[key] = state[key][:250]
    with pytest.raises(CheckpointLayoutError, match='250 positions are no square grid'):
        siglip2_from_hf(state)
