# mmseg's dpt_vit-b16 (mmsegmentation 1.2.2: configs/_base_/models/dpt_vit-b16.py and the code it builds) in this
# project's parts, every option where the two differ set to mmseg's choice:
#   ViT: no patch-embedding bias, LayerNorm eps 1e-5, drop_path 0, position table resized bicubic without
#        antialiasing, taps after blocks 2/5/8/11 before any final norm, starting from the original ImageNet-21k ->
#        1k ViT-B/16 (mmseg's vit-b16_p16_224-80ecf9dd = timm's vit_base_patch16_224.orig_in21k_ft_in1k);
#   neck (mmseg's DPTHead up to its fusion): 'project' readout, widths 96/192/384/768 -> 256, BatchNorm in the
#        fusion units (their convs without bias), no skip unit in the deepest fusion block, mmcv ConvModule init;
#   head: conv3x3 + BN + ReLU, dropout 0.1, conv1x1 (init normal std 0.01); stride-2 logits resized straight to
#        the label size for the loss and to the image at test time (bilinear, align_corners=False);
#   cross-entropy over all pixels of the padded batch (avg_non_ignore=False);
#   test: inputs padded to 16 (the ViT's patch) and the logits of the padded input resized onto the image.
model = dict(
    type='Segmentor',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=16, pad_val=0, seg_pad_val=255),
    backbone=dict(type='ZooBackbone', name='vit_base_patch16_224',
                  pretrained='checkpoints/vit_base_patch16_224.orig_in21k_ft_in1k.safetensors',
                  out_indices=(2, 5, 8, 11), drop_path_rate=0.0, patch_bias=False, norm_eps=1e-5,
                  pos_antialias=False),
    neck=dict(type='DPTNeck', readout='project', hidden_channels=(96, 192, 384, 768), fusion_channels=256,
              fusion_batch_norm=True, deepest_skip_unit=False, init='mmseg'),
    decode_head=dict(type='DPTSegHead', num_classes=150, in_channels=256, dropout=0.1, upsample=False,
                     init='mmseg'),
    auxiliary_head=None,
    loss=dict(type='CrossEntropyLoss', ignore_index=255, avg_non_ignore=False),  # loss_weight 1.0 as mmseg
    test_cfg=dict(mode='whole', padding='resize'))
