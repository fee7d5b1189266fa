# mmseg's upernet_swin (mmsegmentation 1.x: configs/_base_/models/upernet_swin.py with the swin-tiny ADE20K recipe's
# overrides, and the code it builds) in this project's parts, every option where the two differ set to mmseg's:
#   Swin-T: embed 96, depths 2/2/6/2, heads 3/6/12/24, window 7, mlp 4, qkv bias, patch norm, no absolute position
#        table, drop_path 0.3, the four stages tapped, each through its own LayerNorm (mmseg's norm0..norm3),
#        ImageNet-1k weights (mmseg's swin_tiny_patch4_window7_224_20220317-1cdeb081 = the official Swin-T =
#        timm's swin_tiny_patch4_window7_224.ms_in1k); mmseg's window layout (each stage map padded to multiples of
#        7 before the shift, the 7x7 window kept on the 16x16 last map of a 512 crop);
#   neck: none in mmseg (the stage maps go to the heads as they are: PyramidLevels passes them);
#   decode head UPerHead: channels 512, pool scales 1/2/3/6, BN (SyncBN across GPUs), dropout 0.1, mmcv init;
#   auxiliary FCNHead on the stride-16 stage (in_index 2, 384 channels): one 3x3 ConvModule to 256, no concat,
#        dropout 0.1, loss weight 0.4; both heads' logits resized to the label size (bilinear, align_corners False);
#   test: whole image, no padding (batch 1), the stride-4 logits resized onto the image.
model = dict(
    type='Segmentor',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=1, pad_val=0, seg_pad_val=255),
    backbone=dict(type='ZooBackbone', name='swin_tiny_patch4_window7_224',
                  pretrained='checkpoints/swin_tiny_patch4_window7_224.ms_in1k.safetensors',
                  out_indices=(0, 1, 2, 3), drop_path_rate=0.3, window_layout='mmseg'),
    neck=dict(type='PyramidLevels'),
    decode_head=dict(type='UPerHead', in_channels=[96, 192, 384, 768], num_classes=150, channels=512,
                     pool_scales=(1, 2, 3, 6), dropout=0.1, init='mmseg'),
    auxiliary_head=dict(type='FCNHead', in_channels=384, num_classes=150, channels=256, num_convs=1, kernel_size=3,
                        concat_input=False, in_index=2, dropout=0.1, init='mmseg'),
    aux_weight=0.4,
    loss=dict(type='CrossEntropyLoss', ignore_index=255, avg_non_ignore=False),  # loss_weight 1.0 as mmseg
    test_cfg=dict(mode='whole', padding='resize'))
