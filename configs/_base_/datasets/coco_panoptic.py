# COCO panoptic (133 classes: 80 things, 53 stuff) for the mask heads. data_root holds val2017/, train2017/,
# panoptic_{train,val}2017/ (the PNGs) and annotations/panoptic_{train,val}2017.json (or set COCO_ROOT, or
# --data-root). Training as Mask2Former's COCO panoptic recipe: large-scale jitter (a random keep-ratio rescale of the
# 1024x1024 scale by 0.1..2.0), a 1024 crop padded to 1024x1024, flip; evaluation at a 1333x800 keep-ratio input with
# the ground truth at its original size. Samples carry gt_sem_seg, gt_instances and gt_panoptic_seg.
data_root = '{{$COCO_ROOT:data/coco}}'
num_classes = 133
crop_size = (1024, 1024)
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadPanopticAnnotations'),
    dict(type='RandomResize', scale=(1024, 1024), ratio_range=(0.1, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Pad', size=crop_size),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=(1333, 800), keep_ratio=True),
    dict(type='LoadPanopticAnnotations'),  # after Resize: ground truth stays at the image's original size
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=2, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='CocoPanopticDataset', data_root=data_root, ann_file='annotations/panoptic_train2017.json',
                 img_dir='train2017', pan_dir='panoptic_train2017', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=2, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CocoPanopticDataset', data_root=data_root, ann_file='annotations/panoptic_val2017.json',
                 img_dir='val2017', pan_dir='panoptic_val2017', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = [dict(type='PanopticQualityMetric'), dict(type='MaskAPMetric')]
test_evaluator = val_evaluator
