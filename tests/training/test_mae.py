"""MAE pre-training: exact masking, an encoder that never sees hidden patches, the loss on hidden patches of
per-patch normalised pixels (written out here), and a short CPU run whose encoder then fine-tunes in DPT."""
from pathlib import Path

import pytest
import torch

from heads.models import MAEPretrainer
from heads.models.mae import masked_patch_loss, random_masking

from ..reference import shared_data
from ..training_logs import logged

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402


def small_mae(**kwargs):
    torch.manual_seed(0)
    return MAEPretrainer(dict(name='vit_tiny_patch16_224', depth=4, img_size=32, patch_size=8),
                         decoder_dim=32, decoder_depth=1, decoder_heads=2, **kwargs)


@pytest.mark.parametrize('ratio, patches, visible', [(0.75, 64, 16), (0.5, 16, 8), (0.9, 196, 20)])
def test_masking_keeps_exactly_the_requested_fraction(ratio, patches, visible):
    keep, restore, mask = random_masking(5, patches, ratio)
    assert keep.shape == (5, visible) and (mask.sum(1) == patches - visible).all()
    for k, m, r in zip(keep, mask, restore):
        assert len(set(k.tolist())) == visible and (m[k] == 0).all()  # the kept ones are the visible ones
        assert sorted(r.tolist()) == list(range(patches))
    assert not torch.equal(keep[0], keep[1])  # each image draws its own subset


def test_encoder_never_sees_a_hidden_patch():
    model = small_mae().eval()
    images = torch.randn(2, 3, 32, 32)
    torch.manual_seed(1)
    keep, restore, mask = random_masking(2, 16, 0.75)
    seen = []
    hook = model.backbone.blocks[0].register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    latent = model.encode(images, keep)
    hook.remove()
    assert seen[0].shape[1] == 1 + 4  # CLS + the 4 visible patches, nothing else
    changed = images.clone()
    grid_mask = mask.view(2, 4, 4).repeat_interleave(8, 1).repeat_interleave(8, 2).bool()  # b 32 32, hidden pixels
    changed[grid_mask[:, None].expand_as(changed)] = 100.0  # repaint every hidden patch
    torch.testing.assert_close(model.encode(changed, keep), latent)


def reference_loss(pred, images, mask, patch):
    """Per patch: pixels in (row, column, channel) order, minus their mean, over their (unbiased) std."""
    b, c, h, w = images.shape
    total, count = 0.0, 0
    for i in range(b):
        for n in range((h // patch) * (w // patch)):
            if not mask[i, n]:
                continue
            y, x = divmod(n, w // patch)
            pixels = images[i, :, y * patch:(y + 1) * patch, x * patch:(x + 1) * patch].permute(1, 2, 0).reshape(-1)
            target = (pixels - pixels.mean()) / (pixels.var() + 1e-6).sqrt()
            total += ((pred[i, n] - target) ** 2).mean()
            count += 1
    return total / count


def test_loss_is_on_hidden_patches_of_normalised_pixels():
    torch.manual_seed(2)
    images, pred = torch.randn(2, 3, 16, 24), torch.randn(2, 6, 8 * 8 * 3)  # 2 x 3 patches of 8 x 8
    _, _, mask = random_masking(2, 6, 0.5)
    loss = masked_patch_loss(pred, images, mask, patch=8)
    torch.testing.assert_close(loss, reference_loss(pred, images, mask, 8))
    visible_changed = torch.where(mask[..., None].bool(), pred, pred + 5)
    torch.testing.assert_close(masked_patch_loss(visible_changed, images, mask, patch=8), loss)  # visible: no say


def test_mae_model_loss_matches_its_parts():
    model = small_mae()
    images = torch.randn(2, 3, 32, 32)
    torch.manual_seed(4)
    loss = model(images, mode='loss')['loss_mae']
    torch.manual_seed(4)
    pred, mask = model(images)
    torch.testing.assert_close(loss, reference_loss(pred, images, mask, 8))
    assert pred.shape == (2, 16, 8 * 8 * 3) and (mask.sum(1) == 12).all()


@pytest.mark.slow
def test_short_mae_run_lowers_the_loss_and_its_encoder_fine_tunes_in_dpt(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    camvid = str(shared_data('camvid'))
    train_tool.main(['configs/mae_vitt4_camvid.py', '--data-root', camvid, '--work-dir', str(tmp_path / 'mae'),
                     '--cfg-options', 'train_cfg.max_iters=60', 'default_hooks.checkpoint.interval=60',
                     'param_scheduler.0.end=10', 'param_scheduler.1.begin=10', 'param_scheduler.1.end=60',
                     'default_hooks.logger.interval=5'])
    losses, _ = logged(tmp_path / 'mae')
    first, last = [sum(losses[s] for s in steps) / len(steps) for steps in (sorted(losses)[:2], sorted(losses)[-2:])]
    print(f"MAE reconstruction loss {first:.3f} -> {last:.3f}")
    assert last < 0.9 * first
    train_tool.main([
        'configs/dpt_vitt4_camvid_cpu.py', '--data-root', camvid, '--work-dir', str(tmp_path / 'dpt'),
        '--cfg-options', f"model.backbone.pretrained={tmp_path / 'mae' / 'iter_60.pth'}", 'train_cfg.max_iters=2',
        'train_cfg.val_interval=100', 'default_hooks.checkpoint.interval=2', 'default_hooks.logger.interval=1',
        'train_dataloader.batch_size=2'])
    mae = torch.load(tmp_path / 'mae' / 'iter_60.pth', weights_only=True)['state_dict']
    start = torch.load(tmp_path / 'dpt' / 'iter_2.pth', weights_only=True)['state_dict']
    # the encoder arrived: after two small steps its weights are still MAE's, not a fresh initialisation
    for key in ('backbone.blocks.3.attn.qkv.weight', 'backbone.patch_embed.proj.weight'):
        assert (start[key] - mae[key]).abs().max() < 0.01 < (mae[key]).abs().max()
    assert len(logged(tmp_path / 'dpt')[0]) == 2
