# DPT with a ViT-B/16 backbone (mmseg's dpt_vit-b16): taps after blocks 2/5/8/11 before the final norm,
# 'project' readout, reassemble widths 96/192/384/768 resampled x4/x2/x1/x0.5, fusion width 256.
# Pretrained weights are read from a local file: set model.backbone.pretrained (timm layout or ours), e.g.
#   --cfg-options model.backbone.pretrained=checkpoints/vit_base_patch16_224.augreg2_in21k_ft_in1k.safetensors
model = dict(
    type='Segmentor',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=32, pad_val=0, seg_pad_val=255),
    backbone=dict(type='ZooBackbone', name='vit_base_patch16_224', pretrained=None, out_indices=(2, 5, 8, 11),
                  drop_path_rate=0.1),
    neck=dict(type='DPTNeck', readout='project', hidden_channels=(96, 192, 384, 768), fusion_channels=256),
    decode_head=dict(type='DPTSegHead', num_classes=150, in_channels=256, dropout=0.1),
    auxiliary_head=None,
    loss=dict(type='CrossEntropyLoss', ignore_index=255),
    test_cfg=dict(mode='whole'))
