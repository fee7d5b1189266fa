# The CamVid patch classifier with DeiT's data recipe: RandAugment (2 ops, magnitude 9), random erasing (0.25),
# Mixup (0.8) / CutMix (1.0) per batch, repeated augmentation (3), label smoothing 0.1 (from the base config).
#   python tools/train.py configs/cls_vitt_camvid_patches_deit_aug.py --data-root data/camvid_patches
_base_ = ['cls_vitt_camvid_patches.py']
model = dict(data_preprocessor=dict(type='ClassificationPreprocessor', num_classes=11, mixup_alpha=0.8,
                                    cutmix_alpha=1.0))
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='TorchvisionTransform', transform='RandomResizedCrop', size=64, scale=(0.5, 1.0), antialias=True),
    dict(type='TorchvisionTransform', transform='RandomHorizontalFlip'),
    dict(type='TorchvisionTransform', transform='RandAugment', num_ops=2, magnitude=9),
    dict(type='TorchvisionTransform', transform='RandomErasing', p=0.25),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(sampler=dict(_delete_=True, type='RepeatAugSampler', num_repeats=3),
                        dataset=dict(pipeline=train_pipeline))
