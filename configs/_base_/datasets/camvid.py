# CamVid (SegNet version): 11 classes, 480x360 street scenes; label 11 (void) is ignored.
# data_root: the folder with images/{train,val} and annotations/{train,val} (or CAMVID_ROOT, or --data-root).
data_root = '{{$CAMVID_ROOT:data/camvid}}'
num_classes = 11
crop_size = (360, 480)
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(480, 360), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=(480, 360), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=2, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='CamVidDataset', data_root=data_root, split='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=2, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CamVidDataset', data_root=data_root, split='val', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', ignore_index=255)
test_evaluator = val_evaluator
