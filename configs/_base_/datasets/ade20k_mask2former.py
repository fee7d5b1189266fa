# ADE20K semantic segmentation for the mask heads (Mask2Former, EoMT): no panoptic annotation, the targets are one
# mask per class present, made from gt_sem_seg by the model. The training pipeline is mmseg's Mask2Former ADE20K
# recipe (mask2former_swin-t_8xb2-160k_ade20k-512x512): a short edge drawn from 256..1024 (max 2048), 512 crop;
# evaluation as ade20k.py (2048x512 keep-ratio, mIoU).
_base_ = ['ade20k.py']
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomChoiceResize', scales=[int(512 * x * 0.1) for x in range(5, 21)],
         resize_type='ResizeShortestEdge', max_size=2048),
    dict(type='RandomCrop', crop_size={{_base_.crop_size}}, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
