# Depth Anything V2 ViT-S fine-tuned for metric depth on 7-Scenes (kitchen), as the official metric-depth recipe:
# the DINOv2 ViT-S/14 encoder (taps after blocks 2/5/8/11 through its final norm), Depth Anything's neck and head
# (sigmoid x max_depth), SiLog loss (lambda 0.5), AdamW with the encoder at a tenth of the head's learning rate.
# Start from a Depth Anything V2 checkpoint's encoder (the official fine-tuning does the same), or DINOv2 weights
# in timm's, the official or transformers' layout, or from scratch (pretrained=None) where none is at hand:
#   python tools/train.py configs/depth_anything_v2_vits_7scenes.py --data-root ../shared/data/depth-7scenes \
#       --cfg-options model.backbone.pretrained=depth_anything_v2_vits.pth
# Frames stay 640x480 (padded to 644x490, multiples of the 14-pixel patch; the position table is resampled).
_base_ = ['_base_/datasets/seven_scenes.py', '_base_/schedules/schedule_short.py', '_base_/default_runtime.py']
max_depth = 10.0
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=14, pad_val=0),
    backbone=dict(type='ZooBackbone', name='vit_small_patch14_dinov2', pretrained=None, out_indices=(2, 5, 8, 11),
                  tap_norm=True, pos_interp='dinov2', pos_antialias=False, drop_path_rate=0.0),
    neck=dict(type='DepthAnythingNeck', readout='ignore', hidden_channels=(48, 96, 192, 384),
              reassemble_factors=(4, 2, 1, 0.5), fusion_channels=64),
    decode_head=dict(type='DepthAnythingHead', in_channels=64, hidden_channels=32, mode='metric', max_depth=max_depth,
                     upsample=14 / 8),
    loss=dict(type='SiLogLoss', lambd=0.5),
    min_depth=1e-3, max_depth=max_depth,
    test_cfg=dict(mode='whole'))
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=5e-5, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.1), 'pos_embed': dict(decay_mult=0.0),
                                    'prefix': dict(decay_mult=0.0), 'norm': dict(decay_mult=0.0)}))
val_evaluator = dict(type='DepthMetric', min_depth=1e-3, max_depth=max_depth)
test_evaluator = val_evaluator
