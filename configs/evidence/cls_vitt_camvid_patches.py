# Claim b's student without distillation: configs/cls_vitt_camvid_patches.py (ViT-Ti, 4 blocks, 8x8 patches of
# 64x64 CamVid patches) shrunk to a few minutes on one thread.
_base_ = ['../cls_vitt_camvid_patches.py']
max_iters = 150
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(checkpoint=dict(interval=max_iters, max_keep_ckpts=1))
