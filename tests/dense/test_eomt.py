"""EoMT over the zoo's plain ViTs: the Block's mask pass-through, the masked attention's mask (hand-worked), the
annealing schedule (the paper's formula), the families it runs on and those it refuses. Equality with transformers'
EoMT: tests/layouts/test_eomt_hf.py."""
from types import SimpleNamespace

import pytest
import torch

import zoo
from heads.models.eomt import EoMT
from heads.models.eomt_parts import MaskAnnealingHook, annealing_steps, mask_probability
from heads.registry import MODELS
from zoo.core import Block, vit_parts
from zoo.core.execution import set_fused_attention

from ..reference import perturb_, save_safetensors


@pytest.mark.parametrize('fused', [True, False])
def test_block_mask_keeps_token_groups_apart(fused):
    """A block-diagonal mask makes one block on [a, b] equal the block on a and on b apart (norms and MLP are
    per token), on SDPA and on the explicit path; a float mask of 0 / -inf is the same mask."""
    torch.manual_seed(0)
    block = set_fused_attention(perturb_(Block(16, **vit_parts(16, 2), init_values=0.5)).eval(), fused)
    a, b = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    allowed = torch.zeros(8, 8, dtype=torch.bool)
    allowed[:3, :3] = allowed[3:, 3:] = True
    with torch.no_grad():
        apart = torch.cat([block(a), block(b)], dim=1)
        together = block(torch.cat([a, b], dim=1), mask=allowed[None, None])
        additive = torch.zeros(8, 8).masked_fill(~allowed, float('-inf'))
        float_mask = block(torch.cat([a, b], dim=1), mask=additive)
        unmasked = block(torch.cat([a, b], dim=1))
    torch.testing.assert_close(together, apart, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(float_mask, apart, atol=1e-5, rtol=1e-5)
    assert (unmasked - apart).abs().max() > 1e-3


def tiny(name='vit_tiny_patch16_224', num_blocks=2, **backbone):
    torch.manual_seed(0)
    return EoMT(dict(type='ZooBackbone', name=name, depth=3, **backbone), num_classes=4, num_queries=3,
                num_blocks=num_blocks)


def test_attention_mask_hand_worked():
    """Mask logits on the patch grid itself (the bilinear resize is then the identity): query rows see the patches
    with logits > 0 and every query and prefix token; patch and prefix rows see everything."""
    model = tiny()  # 1 prefix token (CLS), 3 queries
    logits = torch.tensor([[[[1.0, -1.0], [0.0, 2.0]],     # query 0: patches 0 and 3
                            [[-1.0, -1.0], [-1.0, -1.0]],  # query 1: none
                            [[3.0, 3.0], [3.0, 3.0]]]])    # query 2: all
    mask = model.attention_mask(logits, (2, 2), 1.0, 3 + 1 + 4)
    want = torch.ones(8, 8, dtype=torch.bool)
    want[0, 4:] = torch.tensor([True, False, False, True])
    want[1, 4:] = False
    assert mask.shape == (1, 1, 8, 8) and torch.equal(mask[0, 0], want)
    assert model.attention_mask(logits, (2, 2), 0.0, 8) is None
    torch.manual_seed(0)
    drawn = model.attention_mask(logits.expand(64, -1, -1, -1), (2, 2), 0.5, 8)[:, 0]
    rows = drawn[:, 1, 4:].all(dim=-1)  # query 1 sees every patch where it dropped its mask, none elsewhere
    assert torch.equal(drawn[:, 1, 4:].any(dim=-1), rows) and 16 < rows.sum() < 48
    kept = (drawn[:, 0, 4:] == want[0, 4:]).all(dim=-1)  # query 0: its own mask, or every patch where dropped
    assert (kept | drawn[:, 0, 4:].all(dim=-1)).all() and 16 < kept.sum() < 48
    assert drawn[:, 2:].all() and drawn[:, :, :4].all()  # query 2's mask is every patch; all see queries, prefix


def test_mask_probability_is_the_papers_polynomial_decay():
    assert mask_probability(99, 100, 200) == 1.0 and mask_probability(200, 100, 200) == 0.0
    assert mask_probability(150, 100, 200) == pytest.approx(0.5 ** 0.9)
    assert mask_probability(125, 100, 200, power=2.0) == pytest.approx(0.75 ** 2)
    # the paper's 4-block COCO recipe: 88692 iterations, blocks annealed over 14782-29564, ..., 59128-73910
    assert annealing_steps(4, 88692) == [(14782, 29564), (29564, 44346), (44346, 59128), (59128, 73910)]
    assert annealing_steps(2, 1000, [(0.0, 0.5), (0.5, 1.0)]) == [(0, 500), (500, 1000)]
    with pytest.raises(ValueError, match='one \\(start, end\\) pair'):
        annealing_steps(2, 1000, [(0.5, 0.1), (0.5, 1.0)])


FAMILIES = {
    'vit_tiny_patch16_224': {},                                     # CLS
    'deit_tiny_distilled_patch16_224': {},                          # CLS + distillation token
    # registers, LayerScale (at 0.5: at DINOv2's 1e-5 the blocks hardly change the tokens)
    'vit_small_patch14_reg4_dinov2': dict(embed_dim=64, num_heads=2, init_values=0.5),
    'vit_small_patch16_dinov3': dict(embed_dim=64, num_heads=2, init_values=0.5),  # rotary positions, registers
    'eva02_tiny_patch14_224': {},                                   # rotary positions, SwiGLU
    'vit_base_patch16_siglip_224': dict(embed_dim=64, num_heads=2),  # no prefix token
}


@pytest.mark.parametrize('name', FAMILIES)
def test_runs_over_plain_vit_families(name):
    model = tiny(name, **FAMILIES[name]).train()
    patch = model.backbone.patch_size
    size = (2 * patch * 4, 3 * patch * 4)  # non-square
    x = torch.randn(2, 3, *size)
    classes, masks, aux = model.forward_logits(x)
    stride = patch // 2 ** len(model.upscale)
    assert classes.shape == (2, 3, 5) and masks.shape == (2, 3, size[0] // stride, size[1] // stride)
    assert len(aux) == 2 and all(c.shape == classes.shape and m.shape == masks.shape for c, m in aux)
    (classes.sum() + masks.sum()).backward()
    assert model.query.weight.grad.abs().sum() > 0 and model.backbone.blocks[-1].attn.qkv.weight.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        masked = model(x, mode='tensor')[1]
        model.set_mask_probabilities([0.0, 0.0])
        assert model.forward_logits(x)[2] == []  # no predictions before the blocks in evaluation without masks
        unmasked = model(x, mode='tensor')[1]
    assert (masked - unmasked).abs().max() > 1e-4 * unmasked.abs().max()


def test_refuses_what_it_cannot_run():
    with pytest.raises(TypeError, match='plain ViT backbone'):
        EoMT(dict(type='ZooBackbone', name='swin_tiny_patch4_window7_224', depths=(1, 1, 1, 1)), num_classes=2)
    with pytest.raises(ValueError, match='position bias'):
        tiny(alibi=True)
    with pytest.raises(ValueError, match='keeps 1 of its 3 blocks'):
        EoMT(zoo.create_backbone('vit_tiny_patch16_224', depth=3, out_indices=(0,)), num_classes=2)
    with pytest.raises(ValueError, match='num_blocks must be from 1'):
        tiny(num_blocks=4)
    with pytest.raises(ValueError, match='2 probabilities in \\[0, 1\\]'):
        tiny().set_mask_probabilities([0.5, 1.5])
    with pytest.raises(TypeError, match='remove the hook'):
        MaskAnnealingHook().before_train_iter(SimpleNamespace(model=torch.nn.Linear(2, 2), iter=0, max_iters=9), 0)
    assert isinstance(MODELS.build(dict(type='EoMT', backbone=dict(type='ZooBackbone', name='vit_tiny_patch16_224',
                                                                   depth=2), num_classes=2, num_blocks=2)), EoMT)


def test_backbone_norm_is_the_pretrained_final_norm(tmp_path):
    """backbone_norm=True: the final norm is the DINOv2 backbone's (tap_norm keeps it), loaded from the file."""
    small = dict(depth=2, embed_dim=64, num_heads=2, img_size=56)
    torch.manual_seed(0)
    source = perturb_(zoo.create_classifier('vit_small_patch14_reg4_dinov2', **small), 0.5)
    path = save_safetensors(source, tmp_path / 'dinov2.safetensors')
    model = EoMT(dict(type='ZooBackbone', name='vit_small_patch14_reg4_dinov2', tap_norm=True, pretrained=path,
                      **small), num_classes=3, num_queries=2, num_blocks=1, backbone_norm=True).eval()
    assert model.norm is None and not any(k.startswith('norm.') for k in model.state_dict())
    torch.testing.assert_close(model.backbone.norm.weight, source.norm.weight, rtol=0, atol=0)
    x = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        classes = model(x, mode='tensor')[0]
        model.backbone.norm.weight.mul_(2.0)  # the norm used is the backbone's
        assert (model(x, mode='tensor')[0] - classes).abs().max() > 1e-3
    with pytest.raises(ValueError, match='tap_norm=True, got DINOv2Backbone without tap_norm'):
        EoMT(dict(type='ZooBackbone', name='vit_small_patch14_reg4_dinov2', **small), num_classes=3, num_blocks=1,
             backbone_norm=True)
    with pytest.raises(ValueError, match='got ViTBackbone'):
        EoMT(dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=2), num_classes=3, num_blocks=1,
             backbone_norm=True)
