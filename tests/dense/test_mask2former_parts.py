"""Mask2Former's pixel decoder and masked-attention decoder equal transformers' modules fed the same backbone
features, with the weights converted by heads.hf.mask2former; the attention-mask rule and the deformable sampling
checked by hand."""
import pytest
import torch

from heads.decode_heads import Mask2FormerPixelDecoder, Mask2FormerTransformerDecoder
from heads.decode_heads.mask2former_decoder import allowed_positions
from heads.decode_heads.mask2former_deform import MultiScaleDeformableAttention, reference_points
from heads.layouts.hf_mask2former import convert_mask2former_head_state

from ..reference import perturb_

transformers = pytest.importorskip('transformers')

WIDTHS = [16, 32, 64, 128]  # the Swin stages' widths, strides 4, 8, 16, 32
TINY = dict(feature_size=32, mask_feature_size=32, hidden_dim=32, encoder_feedforward_dim=48, encoder_layers=2,
            decoder_layers=5, num_attention_heads=2, dim_feedforward=40, num_queries=6, num_labels=3)


def hf_model():
    swin = transformers.SwinConfig(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4,
                                   out_features=['stage1', 'stage2', 'stage3', 'stage4'])
    config = transformers.Mask2FormerConfig(backbone_config=swin, **TINY)
    torch.manual_seed(0)
    return perturb_(transformers.Mask2FormerForUniversalSegmentation(config), std=0.1).eval()


def ours_from(hf):
    pixel = Mask2FormerPixelDecoder(WIDTHS, [4, 8, 16, 32], channels=32, mask_channels=32, num_layers=2, num_heads=2,
                                    ffn_channels=48)
    decoder = Mask2FormerTransformerDecoder(3, in_channels=32, channels=32, mask_channels=32, num_queries=6,
                                            num_layers=4, num_heads=2, ffn_channels=40)
    state = convert_mask2former_head_state(hf.state_dict())
    for prefix, part in (('pixel_decoder.', pixel), ('decoder.', decoder)):
        part.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}, strict=True)
    return pixel.eval(), decoder.eval()


def close(got, expected):
    assert got.shape == expected.shape
    scale = expected.abs().max()
    assert scale > 0 and (got - expected).abs().max() <= 1e-4 * scale


@pytest.mark.parametrize('size', [(64, 64), (96, 64)])
def test_pixel_and_transformer_decoders_equal_transformers(size):
    hf = hf_model()
    pixel, decoder = ours_from(hf)
    h, w = size
    features = [torch.randn(2, c, h // s, w // s) for c, s in zip(WIDTHS, [4, 8, 16, 32])]
    with torch.no_grad():
        expected = hf.model.pixel_level_module.decoder(features)
        mask_features, levels = pixel(features)
        close(mask_features, expected.mask_features)
        assert mask_features.shape[-2:] == (h // 4, w // 4)
        for got, ref in zip(levels, expected.multi_scale_features, strict=True):
            close(got, ref)
        ref = hf.model.transformer_module(expected.multi_scale_features, expected.mask_features)
        outputs = decoder(list(expected.multi_scale_features), expected.mask_features)
        assert len(outputs) == len(ref.masks_queries_logits) == 5
        for (cls, masks), hidden, ref_masks in zip(outputs, ref.intermediate_hidden_states, ref.masks_queries_logits):
            close(cls, hf.class_predictor(hidden.transpose(0, 1)))
            close(masks, ref_masks)
        # the masks were not all-allowed: the masked attention did restrict some queries
        allowed = allowed_positions(outputs[1][1], levels[1].shape[-2:])
        assert not allowed.all()


def test_attention_mask_allows_sigmoid_at_least_half_and_empty_rows_everywhere():
    logits = torch.tensor([[[[-1.0, -2.0], [-0.5, -3.0]],    # nowhere: allowed everywhere
                            [[1.0, -1.0], [0.0, -0.1]]]])    # where sigmoid >= 0.5 (logit >= 0)
    allowed = allowed_positions(logits, (2, 2))
    assert allowed.shape == (1, 1, 2, 4)
    assert allowed[0, 0].tolist() == [[True] * 4, [True, False, True, False]]


def test_deformable_attention_reads_the_sampled_points():
    """One head, one level, one point: offsets zero and the value the identity give the value at each reference
    point (bilinear, cell centres: the map itself); an offset of one cell in x reads the right neighbour (zero past
    the border)."""
    attn = MultiScaleDeformableAttention(4, num_heads=1, num_levels=1, num_points=1)
    with torch.no_grad():
        for linear in (attn.value_proj, attn.output_proj):
            linear.weight.copy_(torch.eye(4))
            linear.bias.zero_()
        attn.sampling_offsets.weight.zero_()
        attn.sampling_offsets.bias.copy_(torch.tensor([1.0, 0.0]))
        value = torch.randn(1, 3 * 5, 4)
        out = attn(value, reference_points([(3, 5)], None, value.dtype), value, [(3, 5)])
    grid = value.view(3, 5, 4)
    expected = torch.cat([grid[:, 1:], torch.zeros(3, 1, 4)], 1).reshape(1, 15, 4)
    torch.testing.assert_close(out, expected)


def test_separate_inputs_qkv_names_the_layout_it_takes():
    from zoo.core import SeparateInputsQKV
    qkv = SeparateInputsQKV(8, num_queries=2)
    q, k, v = qkv(torch.randn(1, 2 + 3 + 3, 8))
    assert q.shape == (1, 2, 8) and k.shape == v.shape == (1, 3, 8)
    with pytest.raises(ValueError, match='queries, then the keys, then as many values'):
        qkv(torch.randn(1, 2 + 3 + 2, 8))
