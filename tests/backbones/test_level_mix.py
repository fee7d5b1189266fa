"""EsViT-style multi-level features: a plain ViT gives every block's tokens as maps, and the DPT neck's level_mix
option makes each of its levels a learned softmax mix of all of them."""
import pytest
import torch

import zoo
from heads.necks import DPTNeck
from heads.necks.level_mix import LevelMix, default_centres

from ..reference import tiny_dpt


def test_vit_gives_every_blocks_tokens_as_maps():
    backbone = zoo.create_backbone('vit_tiny_patch16_224', depth=6, out_indices=range(6)).eval()
    with torch.no_grad():
        maps, prefixes = backbone.forward_taps(torch.randn(1, 3, 48, 80))
    assert len(maps) == len(prefixes) == 6 and backbone.out_channels == [192] * 6
    assert all(m.shape == (1, 192, 3, 5) for m in maps)
    assert not any(torch.allclose(maps[i], maps[i + 1]) for i in range(5))  # six different blocks


def test_mix_is_the_softmax_weighted_sum_and_starts_at_the_usual_taps():
    torch.manual_seed(0)
    mix = LevelMix(12, 4)
    assert default_centres(12, 4) == [2, 5, 8, 11] and default_centres(4, 4) == [0, 1, 2, 3]
    weights = mix.weights
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(4))
    assert weights.argmax(dim=1).tolist() == [2, 5, 8, 11]
    with torch.no_grad():
        mix.logits.normal_()
    maps = [torch.randn(2, 8, 3, 4) for _ in range(12)]
    prefixes = [torch.randn(2, 1, 8) for _ in range(12)]
    mixed, mixed_prefixes = mix(maps, prefixes)
    w = torch.exp(mix.logits.detach())
    w = w / w.sum(dim=1, keepdim=True)
    for g in range(4):
        torch.testing.assert_close(mixed[g], sum(w[g, lv] * maps[lv] for lv in range(12)), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(mixed_prefixes[g], sum(w[g, lv] * prefixes[lv] for lv in range(12)),
                                   atol=1e-6, rtol=1e-5)


def test_dpt_neck_with_level_mix_lets_every_block_contribute():
    torch.manual_seed(0)
    backbone = zoo.create_backbone('vit_tiny_patch16_224', depth=6, out_indices=range(6))
    neck = DPTNeck(backbone.out_channels, backbone.out_strides, backbone.prefix_names, readout='project',
                   hidden_channels=(16, 32, 64, 64), fusion_channels=32, level_mix=True)
    maps, prefixes = backbone.forward_taps(torch.randn(2, 3, 64, 96))
    for m in maps:
        m.retain_grad()
    out = neck(maps, prefixes)
    assert [o.shape[-2:] for o in out] == [(4, 6), (8, 12), (16, 24), (32, 48)]
    out[-1].square().mean().backward()
    assert all(m.grad is not None and m.grad.abs().sum() > 0 for m in maps)  # all six blocks reach the output
    assert neck.level_mix.logits.grad.abs().min() > 0  # and every weight learns
    with pytest.raises(ValueError, match='one width and stride'):
        DPTNeck([64, 128, 256, 512], [4, 8, 16, 32], level_mix=True)
    with pytest.raises(ValueError, match='at least as many backbone levels'):
        DPTNeck([192] * 3, [16] * 3, hidden_channels=(8, 8, 8, 8), level_mix=True)


def test_segmentor_config_with_every_block_and_level_mix_trains():
    from heads.registry import MODELS
    torch.manual_seed(0)
    cfg = tiny_dpt()
    cfg['backbone'] = {**cfg['backbone'], 'depth': 6, 'out_indices': tuple(range(6))}
    cfg['neck'] = {**cfg['neck'], 'level_mix': True}
    model = MODELS.build(cfg)
    before = model.neck.level_mix.logits.detach().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    feats = model.neck(*model.backbone.forward_taps(torch.randn(2, 3, 64, 64)))
    feats[-1].mean().backward()
    optimizer.step()
    assert model.neck.level_mix.logits.shape == (4, 6) and not torch.equal(model.neck.level_mix.logits, before)
