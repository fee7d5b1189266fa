# MAE pre-training of the ViT-Ti (4 blocks) of configs/dpt_vitt4_camvid_cpu.py on CamVid's images (labels unused):
#   python tools/train.py configs/mae_vitt4_camvid.py --data-root ../shared/data/camvid
#   python tools/train.py configs/dpt_vitt4_camvid_cpu.py --data-root ../shared/data/camvid \
#       --cfg-options model.backbone.pretrained=work_dirs/mae_vitt4_camvid/iter_2000.pth
_base_ = ['_base_/schedules/schedule_short.py', '_base_/default_runtime.py']
data_root = '{{$CAMVID_ROOT:data/camvid}}'
model = dict(
    type='MAEPretrainer',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=16),
    backbone=dict(name='vit_tiny_patch16_224', depth=4, img_size=128, out_indices=(0, 1, 2, 3)),
    mask_ratio=0.75, decoder_dim=128, decoder_depth=2, decoder_heads=4, norm_pix_loss=True)
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='RandomResize', scale=(240, 180), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(128, 128)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(
    batch_size=16, num_workers=0, sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='CamVidDataset', data_root=data_root, split='train', pipeline=train_pipeline))
val_dataloader = val_evaluator = val_cfg = None
test_dataloader = test_evaluator = test_cfg = None
optim_wrapper = dict(optimizer=dict(lr=1.5e-3, betas=(0.9, 0.95), weight_decay=0.05))
train_cfg = dict(type='IterBasedTrainLoop', max_iters=2000, val_interval=2000)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=500))
custom_hooks = [dict(type='SafeCheckpointHook')]
