# Faster R-CNN (torchvision) on a zoo backbone: ViT-Ti with 4 blocks from scratch + ViTDet's simple feature pyramid,
# on CamVid's cars and pedestrians (connected components of the label maps, COCO format), sized for a CPU.
#   python tools/make_camvid_detection.py ../shared/data/camvid data/camvid_det
#   python tools/train.py configs/frcnn_vitt_camvid_det.py --data-root data/camvid_det
# Swap the backbone by name (any zoo.list_backbones() entry); kind='maskrcnn' adds masks (with_masks=True and
# iou_types=('bbox', 'segm') below).
_base_ = ['_base_/default_runtime.py', '_base_/schedules/schedule_short.py']
data_root = '{{$CAMVID_DET_ROOT:data/camvid_det}}'
max_iters = 2000
model = dict(
    type='TorchvisionDetector', kind='fasterrcnn', backbone='vit_tiny_patch16_224', num_classes=3,  # + background
    backbone_kwargs=dict(depth=4, drop_path_rate=0.0), out_channels=64,
    min_size=180, max_size=240,  # torchvision's own resize: CamVid's 480x360 at half size
    rpn_pre_nms_top_n_train=600, rpn_post_nms_top_n_train=300, rpn_pre_nms_top_n_test=300,
    rpn_post_nms_top_n_test=150, rpn_batch_size_per_image=64, box_batch_size_per_image=64)
train_dataloader = dict(
    batch_size=2, num_workers=0, sampler=dict(type='InfiniteSampler', shuffle=True), collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type='CocoDetectionDataset', data_root=data_root, ann_file='annotations/instances_train.json',
                 img_dir='train', skip_empty=True, flip_prob=0.5))
val_dataloader = dict(
    batch_size=2, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False), collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type='CocoDetectionDataset', data_root=data_root, ann_file='annotations/instances_val.json',
                 img_dir='val'))
test_dataloader = val_dataloader
val_evaluator = dict(type='CocoDetectionMetric', ann_file=data_root + '/annotations/instances_val.json')
test_evaluator = val_evaluator
optim_wrapper = dict(optimizer=dict(lr=1e-3), clip_grad=dict(max_norm=10.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=50, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=500)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=500, max_keep_ckpts=2))
custom_hooks = [dict(type='SafeCheckpointHook')]
