# EoMT on CamVid sized for a CPU, beside configs/dpt_vitt4_camvid_cpu.py (the same ViT-Ti with 4 blocks from scratch,
# images, augmentation and schedule): 50 queries join the tokens before the last 2 blocks, masks at stride 4; the
# masked attention anneals block by block (MaskAnnealingHook: block i from (i + 1) / 4 to (i + 2) / 4 of the run),
# so that evaluation runs without masks. Semantic results (class scores = softmax classes x sigmoid masks).
#   python tools/train.py configs/eomt_vitt4_camvid_cpu.py --data-root ../shared/data/camvid
_base_ = ['_base_/datasets/camvid.py', '_base_/schedules/schedule_160k.py', '_base_/default_runtime.py']
max_iters = 400
effective_batch_size = None  # batch 8 on one process, no accumulation
model = dict(
    type='EoMT',
    backbone=dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, drop_path_rate=0.0),
    num_classes={{_base_.num_classes}}, num_queries=50, num_blocks=2,
    loss=dict(num_points=4096),  # of a 176x240 crop's 42240 pixels (the recipe's 12544 are for 640x640)
    data_preprocessor=dict(type='DensePreprocessor', size_divisor=16),
    test_cfg=dict(tasks=('semantic',)))
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
optim_wrapper = dict(optimizer=dict(lr=1e-3),
                     paramwise_cfg=dict(custom_keys={'query': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=100)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=100, max_keep_ckpts=2))
custom_hooks = [dict(type='SafeCheckpointHook'), dict(type='PredictionVisualizationHook'),
                dict(type='MaskAnnealingHook')]
