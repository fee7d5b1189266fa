# CamVid with panoptic targets, sized for short CPU runs (240x180, as dpt_vitt4_camvid_cpu.py): CamVidPanopticDataset
# splits Car, Pedestrian and Bicyclist into instances (8-connected components of at least 64 px; smaller pieces are
# crowd), the 8 other classes are stuff. Samples carry gt_sem_seg, gt_instances (every non-crowd segment: the
# targets of panoptic mask classification) and gt_panoptic_seg. The evaluators read pred_sem_seg, pred_panoptic_seg
# and pred_instances: a mask head's test_cfg asks for tasks=('semantic', 'instance', 'panoptic'); keep
# semantic_evaluator alone for a head that predicts label maps only (DPT, UperNet).
# data_root: the folder with images/{train,val} and annotations/{train,val} (or CAMVID_ROOT, or --data-root).
data_root = '{{$CAMVID_ROOT:data/camvid}}'
num_classes = 11
thing_classes = ('Car', 'Pedestrian', 'Bicyclist')
stuff_classes = [0, 1, 2, 3, 4, 5, 6, 7]  # the other classes' indices, for a mask head's test_cfg (panoptic merging)
crop_size = (176, 240)
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadPanopticAnnotations'),
    dict(type='RandomResize', scale=(240, 180), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=(240, 180), keep_ratio=True),
    dict(type='LoadPanopticAnnotations'),  # after Resize: ground truth stays at the image's original size
    dict(type='PackDenseInputs'),
]
dataset_type = 'CamVidPanopticDataset'
train_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', thing_classes=thing_classes,
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, split='val', thing_classes=thing_classes,
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
semantic_evaluator = dict(type='IoUMetric', ignore_index=255)
val_evaluator = [semantic_evaluator, dict(type='PanopticQualityMetric'), dict(type='MaskAPMetric')]
test_evaluator = val_evaluator
