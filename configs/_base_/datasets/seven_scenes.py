# Microsoft 7-Scenes RGB-D (kitchen): 640x480 frames, depth PNGs in millimetres, 0 and 65535 invalid.
# data_root: the folder with rgb/, depth/, train.txt and val.txt (or SEVEN_SCENES_ROOT, or --data-root).
data_root = '{{$SEVEN_SCENES_ROOT:data/7scenes-kitchen}}'
crop_size = (480, 640)
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations', seg=False, depth=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations', seg=False, depth=True),
    dict(type='PackDenseInputs'),
]
dataset = dict(type='RGBDDepthDataset', data_root=data_root, depth_scale=1000.0, depth_invalid=(0, 65535))
train_dataloader = dict(
    batch_size=2, num_workers=2, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(dataset, list_file='train.txt', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=2, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(dataset, list_file='val.txt', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='DepthMetric', min_depth=1e-3, max_depth=10.0)
test_evaluator = val_evaluator
