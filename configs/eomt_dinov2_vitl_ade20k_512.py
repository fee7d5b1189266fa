# EoMT-L on ADE20K semantic segmentation at 512x512, the EoMT paper's recipe key by key (Kerssies et al., CVPR 2025;
# tue-mps/eomt configs/dinov2/ade20k/semantic/eomt_large_512.yaml with the defaults it inherits from
# training/mask_classification_semantic.py, training/lightning_module.py, models/eomt.py, models/vit.py,
# datasets/ade20k_semantic.py, datasets/transforms.py and main.py; its model zoo: 58.4 mIoU). The EoMT repository has
# no 640x640 ADE20K semantic recipe: its ADE20K 640 configs are panoptic. tests/dense/test_eomt_recipes.py holds
# the facts, one source line each.
#   python tools/train.py configs/eomt_dinov2_vitl_ade20k_512.py --data-root /data/ade      (1 GPU, batch 16)
#   torchrun --nproc_per_node 4 tools/train.py configs/eomt_dinov2_vitl_ade20k_512.py --launcher pytorch \
#       --cfg-options train_dataloader.batch_size=4                             (4 GPUs x 4, the README's layout)
# Where this project cannot say what the recipe does, the difference is named here (and in the test):
#   - colour jitter: the recipe's is torchvision's (brightness and contrast as factors in 1 -/+ 32/255 and 0.5..1.5
#     blended with the grey mean, saturation blended with greyscale, hue +/- 18 degrees) before the flip and scale
#     jitter; mmseg's PhotoMetricDistortion here (the same probabilities and order, but additive brightness +/- 32,
#     contrast as a plain factor, saturation and hue (+/- 36 degrees) in OpenCV's HSV), after the crop;
#   - a crop whose every pixel is unlabelled is redrawn by the recipe (from the whole transform); not here; nor are
#     the training images without any labelled pixel left out (its check_empty_targets);
#   - resizing: the recipe's is antialiased (torchvision in training, PIL for the test images); OpenCV's bilinear
#     here, without antialiasing when it shrinks;
#   - test windows: the recipe spreads the overlap of its ceil(long / 512) windows evenly; 'slide' with stride 512
#     gives the same count and, for the two windows of most ADE20K images, the same windows (three or more: the last
#     one flush with the end); the test Resize caps the long side at 2048 (the recipe does not: images wider than
#     4:1 only);
#   - torch.compile (the recipe compiles the whole LightningModule by default) is tools/train.py's --compile here.
_base_ = ['_base_/models/eomt_dinov2_vitl.py', '_base_/datasets/ade20k_mask2former.py',
          '_base_/schedules/schedule_eomt.py', '_base_/default_runtime.py']
crop_size = (512, 512)
num_classes = 150
model = dict(
    backbone=dict(img_size=512),
    num_classes=num_classes, num_queries=100,
    data_preprocessor=dict(size=crop_size, size_divisor=1),  # training batches padded to the crop
    # the recipe's windowed evaluation: short side to 512, 512x512 windows along the long side, class scores
    # (softmax classes x sigmoid masks, the masks resized to the window) averaged where windows overlap
    test_cfg=dict(mode='slide', tasks=('semantic',), crop_size=crop_size, stride=crop_size))
# torchvision's ScaleJitter to 512x512 (the long side to 512 x U(0.5, 2.0)), RandomCrop 512 (no class-ratio
# retry), a horizontal flip, colour jitter (above); a crop smaller than 512 padded bottom/right with black pixels and
# unlabelled targets, as the recipe pads before its crop
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=1.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='Pad', size=crop_size, pad_val=0, seg_pad_val=255),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(batch_size=16, dataset=dict(pipeline=train_pipeline))
# 31 epochs of ADE20K's training images at batch 16: the yaml's annealing steps are sixths of 39120 steps
max_iters = 39120
param_scheduler = [dict(type='TwoStageWarmupPolyLR', warmup=(500, 1000), power=0.9, begin=0, end=max_iters,
                        by_epoch=False)]
# validation after every epoch (39120 / 31 steps)
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=1262)
# masked attention annealed block by block: block i's probability (1 - progress) ** 0.9 from step 6520 (i + 1) to
# 6520 (i + 2), i.e. (i + 1) / 6 to (i + 2) / 6 of the run (MaskAnnealingHook's default windows)
custom_hooks = [dict(type='SafeCheckpointHook'), dict(type='PredictionVisualizationHook'),
                dict(type='MaskAnnealingHook', power=0.9)]
default_hooks = dict(checkpoint=dict(interval=1262))
randomness = dict(seed=0)  # seed_everything_default=0
