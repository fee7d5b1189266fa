# EoMT-L on COCO panoptic segmentation at 640x640, the EoMT paper's recipe key by key (Kerssies et al., CVPR 2025;
# tue-mps/eomt configs/dinov2/coco/panoptic/eomt_large_640.yaml with the defaults it inherits from
# training/mask_classification_panoptic.py, training/lightning_module.py, models/eomt.py, models/vit.py,
# datasets/coco_panoptic.py, datasets/transforms.py and main.py; its model zoo: 56.0 PQ). The model and optimisation
# are those of configs/eomt_dinov2_vitl_ade20k_512.py (_base_/models/eomt_dinov2_vitl.py,
# _base_/schedules/schedule_eomt.py); tests/dense/test_eomt_recipes.py holds the facts of both.
#   python tools/train.py configs/eomt_dinov2_vitl_coco_panoptic_640.py --data-root /data/coco      (1 GPU, batch 16)
#   torchrun --nproc_per_node 4 tools/train.py configs/eomt_dinov2_vitl_coco_panoptic_640.py --launcher pytorch \
#       --cfg-options train_dataloader.batch_size=4                     (the README's 4 GPUs x 4, ~6 h on H100s)
# Where this project cannot say what the recipe does, the difference is named here (and in the test):
#   - test padding: the recipe pads each test image (long side 640) to 640x640 with black, so that the model always
#     sees the 40x40 grid it was built for; here the model runs on the image padded to a multiple of 16, the
#     position table resampled to that grid (a 640x480 image: 40x30);
#   - panoptic merging keeps a query's segment when the share of its mask it wins is at least 0.8 (recipe) or above
#     0.8 (here, detectron2's): only exact ties differ;
#   - training images without any segment are not left out (the recipe's check_empty_targets), a crop without any
#     target is not redrawn, and resizing is OpenCV's bilinear without antialiasing (the recipe's torchvision and PIL
#     resizes are antialiased);
#   - torch.compile (the recipe compiles the whole LightningModule by default) is tools/train.py's --compile here.
_base_ = ['_base_/models/eomt_dinov2_vitl.py', '_base_/datasets/coco_panoptic.py',
          '_base_/schedules/schedule_eomt.py', '_base_/default_runtime.py']
crop_size = (640, 640)
num_classes = 133
stuff_classes = list(range(80, 133))  # eomt_large_640.yaml stuff_classes: the 53 stuff classes after the 80 things
model = dict(
    backbone=dict(img_size=640),
    num_classes=num_classes, num_queries=200,
    data_preprocessor=dict(size=crop_size),  # training batches at the crop
    # queries whose best class is not no-object with a probability above 0.8; a pixel goes to the query with the
    # highest score x mask probability, inside that query's mask (probability >= 0.5); a segment is kept when it
    # wins 0.8 of its mask; stuff segments of one class merged
    test_cfg=dict(tasks=('panoptic',), object_threshold=0.8, mask_threshold=0.5, overlap_threshold=0.8,
                  stuff_classes=stuff_classes))
# torchvision's ScaleJitter to 640x640 (the long side to 640 x U(0.1, 2.0)), RandomCrop 640, a horizontal flip, no
# colour jitter (color_jitter_enabled=False); crowd segments are no targets; a crop smaller than 640 padded
# bottom/right with black pixels and void
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadPanopticAnnotations'),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.1, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=1.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Pad', size=crop_size, pad_val=0, seg_pad_val=255),
    dict(type='PackDenseInputs'),
]
# evaluation: the long side to 640 (scale_img_size_instance_panoptic: factor min(640 / h, 640 / w)), the masks
# resized to the image's original size; panoptic quality (the recipe logs PQ, SQ and RQ)
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=crop_size, keep_ratio=True),
    dict(type='LoadPanopticAnnotations'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(batch_size=16, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = [dict(type='PanopticQualityMetric')]
test_evaluator = val_evaluator
# 12 epochs of COCO's training images at batch 16: the yaml's annealing steps are sixths of 88692 steps
max_iters = 88692
param_scheduler = [dict(type='TwoStageWarmupPolyLR', warmup=(500, 1000), power=0.9, begin=0, end=max_iters,
                        by_epoch=False)]
# validation after every epoch (88692 / 12 steps)
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=7391)
# masked attention annealed block by block: block i from step 14782 (i + 1) to 14782 (i + 2), (i + 1) / 6 to
# (i + 2) / 6 of the run (MaskAnnealingHook's default windows)
custom_hooks = [dict(type='SafeCheckpointHook'), dict(type='PredictionVisualizationHook'),
                dict(type='MaskAnnealingHook', power=0.9)]
default_hooks = dict(checkpoint=dict(interval=7391))
randomness = dict(seed=0)  # seed_everything_default=0
