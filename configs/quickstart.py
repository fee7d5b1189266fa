# The quickstart: a small DPT (4-block ViT with 8x8 patches) learns to segment procedurally generated scenes
# (sky, ground, boxes, discs) — no downloads, a few minutes on 2 CPU cores. It trains, evaluates (mIoU per
# class), and writes work_dirs/quickstart/predictions.png with predictions next to the ground truth.
#   python tools/train.py configs/quickstart.py
_base_ = ['_base_/default_runtime.py']
size = (96, 128)
model = dict(
    type='Segmentor',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=32),
    backbone=dict(type='ZooBackbone', name='vit_tiny_patch16_224', img_size=size, patch_size=8, depth=4,
                  out_indices=(0, 1, 2, 3)),
    neck=dict(type='DPTNeck', readout='project', hidden_channels=(32, 64, 128, 192), fusion_channels=64),
    decode_head=dict(type='DPTSegHead', num_classes=4, in_channels=64),
    test_cfg=dict(mode='whole'))
train_pipeline = [dict(type='LoadImage'), dict(type='LoadAnnotations'), dict(type='RandomFlip', prob=0.5),
                  dict(type='PackDenseInputs')]
test_pipeline = [dict(type='LoadImage'), dict(type='LoadAnnotations'), dict(type='PackDenseInputs')]
train_dataloader = dict(
    batch_size=8, num_workers=0, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='SyntheticScenes', num_samples=512, size=size, seed=0, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='SyntheticScenes', num_samples=32, size=size, seed=1, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', ignore_index=255)
test_evaluator = val_evaluator
max_iters = 600
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01),
                     paramwise_cfg=dict(custom_keys={'pos_embed': dict(decay_mult=0.0),
                                                     'prefix': dict(decay_mult=0.0), 'norm': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=50, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(logger=dict(interval=50), checkpoint=dict(interval=max_iters))
