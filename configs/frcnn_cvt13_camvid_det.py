# Faster R-CNN (torchvision) on a zoo backbone: CvT-13 (one block per stage, from scratch) + an FPN over its
# stride-4/8/16 maps, on CamVid's cars and pedestrians (connected components of the label maps, COCO format), CPU-sized.
#   python tools/make_camvid_detection.py ../shared/data/camvid data/camvid_det
#   python tools/train.py configs/frcnn_cvt13_camvid_det.py --data-root data/camvid_det
# Any zoo backbone fits (plain ones get ViTDet's simple feature pyramid), e.g. --cfg-options
# model.backbone=vit_tiny_patch16_224 model.backbone_kwargs="dict(depth=4)"; kind='maskrcnn' adds masks (with
# with_masks=True in the datasets and iou_types=('bbox', 'segm') in the evaluator).
_base_ = ['_base_/default_runtime.py', '_base_/schedules/schedule_short.py']
data_root = '{{$CAMVID_DET_ROOT:data/camvid_det}}'
max_iters = 2000
model = dict(
    type='TorchvisionDetector', kind='fasterrcnn', backbone='cvt_13_224', num_classes=3,  # + background
    backbone_kwargs=dict(depths=(1, 1, 1)), out_channels=64,
    min_size=180, max_size=240,  # torchvision's own resize: CamVid's 480x360 at half size
    anchor_size=8,  # 8..128 px over strides 4..64: at half size the median car is 17 px, the median pedestrian 10
    box_score_thresh=0.01,  # detections kept for COCO evaluation (at most 100 per image)
    rpn_pre_nms_top_n_train=600, rpn_post_nms_top_n_train=300, rpn_pre_nms_top_n_test=300,
    rpn_post_nms_top_n_test=150, rpn_batch_size_per_image=64, box_batch_size_per_image=64)
train_dataloader = dict(
    batch_size=2, num_workers=0, sampler=dict(type='InfiniteSampler', shuffle=True),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type='CocoDetectionDataset', data_root=data_root, ann_file='annotations/instances_train.json',
                 img_dir='train', skip_empty=True, flip_prob=0.5))
val_dataloader = dict(
    batch_size=2, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type='CocoDetectionDataset', data_root=data_root, ann_file='annotations/instances_val.json',
                 img_dir='val'))
test_dataloader = val_dataloader
val_evaluator = dict(type='CocoDetectionMetric')  # against the val set's ann_file
test_evaluator = val_evaluator
optim_wrapper = dict(optimizer=dict(lr=1e-3), clip_grad=dict(max_norm=10.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=50, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=500)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=500, max_keep_ckpts=2))
