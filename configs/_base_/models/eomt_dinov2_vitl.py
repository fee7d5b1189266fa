# EoMT-L (Kerssies et al., CVPR 2025; tue-mps/eomt models/eomt.py and models/vit.py with the defaults of its
# training/mask_classification_*.py): DINOv2-L/14 with 4 registers (timm's vit_large_patch14_reg4_dinov2, LVD-142M
# weights) built with 16-pixel patches (timm resamples the 14x14 patch kernel to 16x16 by FlexiViT's pseudo-inverse
# and the position table to the new grid, bicubic with antialiasing: load_pretrained does both; a config sets
# backbone.img_size to its crop), no drop path; queries joined before the last 4 blocks; predictions through the
# encoder's own final norm; Mask2Former's loss (class 2, mask 5, dice 5, no-object 0.1, 12544 points sampled with
# oversampling 3 and importance 0.75; the matcher's costs the same weights) on every block's predictions; images / 255
# normalised by ImageNet's mean and std (= these on 0..255). A config sets num_classes, num_queries, the image size
# and test_cfg.
model = dict(
    type='EoMT',
    backbone=dict(type='ZooBackbone', name='vit_large_patch14_reg4_dinov2',
                  pretrained='checkpoints/vit_large_patch14_reg4_dinov2.lvd142m.safetensors',
                  patch_size=16, tap_norm=True, drop_path_rate=0.0),
    num_blocks=4, backbone_norm=True,
    loss=dict(type='MaskClassificationLoss', class_weight=2.0, mask_weight=5.0, dice_weight=5.0,
              no_object_weight=0.1, num_points=12544, oversample_ratio=3.0, importance_sample_ratio=0.75),
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=16, pad_val=0, seg_pad_val=255))
