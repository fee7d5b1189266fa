# Image classification of CamVid patches (an ImageFolder made by tools/make_patch_dataset.py) with a small ViT:
#   python tools/make_patch_dataset.py ../shared/data/camvid data/camvid_patches --size 64
#   python tools/train.py configs/cls_vitt_camvid_patches.py --data-root data/camvid_patches
# Any zoo classifier works in its place: model.backbone.name=deit_tiny_patch16_224, cvt_13_224, ...
_base_ = ['_base_/schedules/schedule_short.py', '_base_/default_runtime.py']
data_root = '{{$CAMVID_PATCHES_ROOT:data/camvid_patches}}'
classes = ('Sky', 'Building', 'Pole', 'Road', 'Pavement', 'Tree', 'SignSymbol', 'Fence', 'Car', 'Pedestrian',
           'Bicyclist')
model = dict(
    type='ImageClassifier',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=16),
    backbone=dict(name='vit_tiny_patch16_224', depth=4, img_size=64, patch_size=8, drop_path_rate=0.0),
    num_classes=len(classes), pooling='token', label_smoothing=0.1)
train_pipeline = [dict(type='LoadImage'), dict(type='RandomFlip', prob=0.5), dict(type='PackDenseInputs')]
test_pipeline = [dict(type='LoadImage'), dict(type='PackDenseInputs')]
train_dataloader = dict(
    batch_size=32, num_workers=0, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='ImageFolderDataset', data_root=data_root, split='train', classes=classes,
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=64, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='ImageFolderDataset', data_root=data_root, split='val', classes=classes,
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='AccuracyMetric', topk=(1, 5))
test_evaluator = val_evaluator
max_iters = 300
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=100)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_iters))
custom_hooks = [dict(type='SafeCheckpointHook')]
