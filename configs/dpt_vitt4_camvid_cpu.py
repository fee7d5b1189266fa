# DPT on CamVid sized for a CPU: ViT-Ti with 4 blocks (from scratch), a narrow neck, 240x180 images, 400
# iterations (its mIoU and time: `python tools/short_runs.py --data ../shared/data camvid_cpu`, recorded in
# docs/training.md's short-run table). The model behind the pictures in docs/visualization.md:
#   python tools/train.py configs/dpt_vitt4_camvid_cpu.py --data-root ../shared/data/camvid
_base_ = ['dpt_vitb_camvid.py']
max_iters = 400
effective_batch_size = None  # batch 8 on one process, no accumulation
model = dict(
    backbone=dict(name='vit_tiny_patch16_224', depth=4, out_indices=(0, 1, 2, 3), drop_path_rate=0.0),
    neck=dict(hidden_channels=(32, 64, 128, 192), fusion_channels=64),
    decode_head=dict(in_channels=64))
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(240, 180), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(176, 240), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=(240, 180), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(batch_size=8, num_workers=0, persistent_workers=False,
                        dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
predict_scale = (240, 180)
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=100)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=100, max_keep_ckpts=2))
