# Claim c's pre-training: configs/mae_vitt4_camvid.py (MAE of the ViT-Ti-4 of dpt_vitt4_camvid.py on CamVid's
# train images, labels unused) shrunk to a few minutes on one thread.
_base_ = ['../mae_vitt4_camvid.py']
max_iters = 300
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
    dict(type='CosineAnnealingLR', eta_min=0.0, by_epoch=False, begin=20, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(checkpoint=dict(interval=max_iters, max_keep_ckpts=1))
