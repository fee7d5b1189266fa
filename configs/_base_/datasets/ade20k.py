# ADE20K (ADEChallengeData2016): 150 classes, labels reduced by one (0 = other -> 255 ignored).
# data_root: the folder holding ADEChallengeData2016 (or set ADE20K_ROOT, or pass --data-root to the tools).
data_root = '{{$ADE20K_ROOT:data/ade}}'
num_classes = 150
crop_size = (512, 512)
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    dict(type='LoadAnnotations'),  # after Resize: ground truth stays at the image's original size
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=2, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='ADE20KDataset', data_root=data_root, split='training', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=2, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='ADE20KDataset', data_root=data_root, split='validation', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', ignore_index=255)
test_evaluator = val_evaluator
