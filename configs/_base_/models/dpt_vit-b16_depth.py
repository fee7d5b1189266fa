# DPT ViT-B/16 for metric monocular depth: the segmentation model's backbone and neck with a depth head
# predicting metres (sigmoid x max_depth, fp32) trained with the SiLog loss.
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=32, pad_val=0),
    backbone=dict(type='ZooBackbone', name='vit_base_patch16_224', pretrained=None, out_indices=(2, 5, 8, 11),
                  drop_path_rate=0.1),
    neck=dict(type='DPTNeck', readout='project', hidden_channels=(96, 192, 384, 768), fusion_channels=256),
    decode_head=dict(type='DPTDepthHead', in_channels=256, mode='metric', max_depth=10.0),
    loss=dict(type='SiLogLoss', lambd=0.85),
    min_depth=1e-3, max_depth=10.0,
    test_cfg=dict(mode='whole'))
