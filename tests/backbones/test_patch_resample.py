"""A checkpoint's patch kernel of another patch size loads resampled (FlexiViT's pseudo-inverse resize, as timm's
``resample_patch_embed``): DINOv2's 14x14 weights in a 16-pixel-patch model, as EoMT builds its backbone, give
timm's outputs for the same load; the new kernel answers each resized tile as the old one answered the tile."""
import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.core.patch_embed import resample_patch_kernel, resize_matrix

from ..reference import save_safetensors, timm_reference

timm = pytest.importorskip('timm')


def test_resampled_kernel_answers_resized_tiles_as_the_old_kernel_answered_the_tiles():
    torch.manual_seed(0)
    old = torch.randn(5, 3, 14, 14)
    new = resample_patch_kernel(old, (16, 16))
    tiles = torch.randn(4, 3, 14, 14)
    resized = F.interpolate(tiles, size=(16, 16), mode='bicubic', antialias=True, align_corners=False)
    torch.testing.assert_close(F.conv2d(resized, new, stride=16), F.conv2d(tiles, old, stride=14),
                               atol=1e-4, rtol=1e-4)
    assert resize_matrix((14, 14), (16, 16)).shape == (256, 196)
    assert resample_patch_kernel(old, (14, 14)) is old
    from timm.layers import resample_patch_embed
    torch.testing.assert_close(new, resample_patch_embed(old, [16, 16]).float(), atol=1e-5, rtol=1e-4)


def test_dinov2_weights_at_16_pixel_patches_equal_timms_load(tmp_path):
    from timm.models.vision_transformer import checkpoint_filter_fn
    small = dict(depth=2, embed_dim=64, num_heads=2)
    reference14 = timm_reference('vit_small_patch14_reg4_dinov2', img_size=56, **small)
    path = save_safetensors(reference14, tmp_path / 'w14.safetensors')
    # 4x4 patches of 14 pixels -> 5x5 of 16: the patch kernel and the position table both resampled
    reference16 = timm.create_model('vit_small_patch14_reg4_dinov2', pretrained=False, num_classes=1000,
                                    img_size=80, patch_size=16, **small).eval()
    reference16.load_state_dict(checkpoint_filter_fn(reference14.state_dict(), reference16))
    ours = zoo.create_classifier('vit_small_patch14_reg4_dinov2', img_size=80, patch_size=16, num_classes=1000,
                                 pretrained=path, **small).eval()
    assert ours.patch_embed.proj.weight.shape[-2:] == (16, 16)
    x = torch.randn(2, 3, 80, 80)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), reference16(x), atol=1e-4, rtol=1e-4)
    report = zoo.load_pretrained(ours, path)
    assert {'patch_embed.proj.weight', 'pos_embed.weight'} <= set(report.resized)
