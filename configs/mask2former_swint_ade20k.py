# mmseg's Mask2Former Swin-T recipe on ADE20K, key by key (mmsegmentation 1.x mask2former_swin-t_8xb2-160k_ade20k-
# 512x512 on its base mask2former_r50_8xb2-160k_ade20k-512x512, the head mmdet's Mask2FormerHead: 48.66 mIoU
# single-scale after 160k iterations at batch 16; tests/layouts/test_mask2former_mmseg.py holds the table).
#   python tools/train.py configs/mask2former_swint_ade20k.py --data-root /data/ade           (1 GPU: 8 x 2 accumulated)
#   torchrun --nproc_per_node 8 tools/train.py configs/mask2former_swint_ade20k.py --launcher pytorch   (8 GPUs x 2)
# mmseg's Mask2Former checkpoints (mmdet's head names) have no layout loader here: train from the ImageNet Swin-T, or
# load transformers' Mask2Former folders through heads.from_pretrained_hf.
_base_ = ['_base_/datasets/ade20k_mask2former.py', '_base_/schedules/schedule_160k.py', '_base_/default_runtime.py']
# mmseg's model in this project's parts, every option where the two differ set to mmseg's:
#   Swin-T: as configs/upernet_swint_ade20k.py (mmseg's SwinTransformer, drop_path 0.3, the four stages each through
#        its own LayerNorm, the official ImageNet-1k weights, mmseg's window layout);
#   pixel decoder (mmdet's MSDeformAttnPixelDecoder): the stride 8/16/32 maps projected to 256 (1x1 conv + GN 32),
#        6 deformable encoder layers (8 heads, 3 levels, 4 points, FFN 1024, ReLU, dropout 0; sine positions,
#        normalised, 128 per axis, plus a learned level embedding), one FPN step to stride 4, 256 mask channels;
#   transformer decoder: 100 queries, 9 masked-attention layers over the 3 levels in turn (8 heads, FFN 2048, dropout
#        0), no input projection (256 in, 256 wide), a class head (150 + no-object) and a 3-layer mask MLP;
#   loss: class CE x 2.0 (no-object weighted 0.1), point-sampled sigmoid-CE x 5.0 and dice (eps 1) x 5.0 on the
#        final and the 9 earlier predictions, 12544 points (3.0 oversampling, 0.75 by uncertainty); Hungarian matching
#        with the same weights as costs on 12544 uniform points; targets: one mask per class of gt_sem_seg;
#   test: whole image padded to a multiple of 32, the stride-4 mask logits resized to the padded input, softmax
#        classes (no-object dropped) x sigmoid masks, cropped and resized to the image.
# Not expressed here: mmdet's initialisation of the head (Xavier-normal decoder weights, Caffe2-Xavier convolutions;
# the head here starts from PyTorch's defaults and Deformable DETR's offsets), and mmseg's keeping of every checkpoint
# (max_keep_ckpts 3 here, the best kept besides).
model = dict(
    type='Mask2Former',
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size={{_base_.crop_size}}, size_divisor=32, pad_val=0, seg_pad_val=255),
    backbone=dict(type='ZooBackbone', name='swin_tiny_patch4_window7_224',
                  pretrained='checkpoints/swin_tiny_patch4_window7_224.ms_in1k.safetensors',
                  out_indices=(0, 1, 2, 3), drop_path_rate=0.3, window_layout='mmseg'),
    pixel_decoder=dict(type='Mask2FormerPixelDecoder', in_channels=[96, 192, 384, 768], in_strides=[4, 8, 16, 32],
                       channels=256, mask_channels=256, num_layers=6, num_heads=8, num_points=4, ffn_channels=1024,
                       num_levels=3, common_stride=4, dropout=0.0),
    decoder=dict(type='Mask2FormerTransformerDecoder', num_classes={{_base_.num_classes}}, channels=256,
                 mask_channels=256, num_queries=100, num_layers=9, num_heads=8, ffn_channels=2048, num_levels=3,
                 input_proj=False, dropout=0.0),
    loss=dict(type='MaskClassificationLoss', class_weight=2.0, mask_weight=5.0, dice_weight=5.0,
              no_object_weight=0.1, num_points=12544, oversample_ratio=3.0, importance_sample_ratio=0.75,
              cost_class=2.0, cost_mask=5.0, cost_dice=5.0),
    test_cfg=dict(mode='whole', tasks=('semantic',)))
# AdamW 1e-4, weight decay 0.05, gradients clipped to L2 norm 0.01, poly decay (power 0.9) over 160k iterations
# without warm-up. mmseg's paramwise rules on this model's names: the backbone at 0.1 of the rate; no decay on its
# LayerNorms (mmseg lists patch_embed.norm, norm0..3 = our out_norms, each block's norm1/norm2 and each merging's
# norm: our merging at the start of stage s is mmseg's at the end of stage s - 1) and relative position tables (ours:
# attn.pos_bias.table), also at 0.1; no decay on the queries' content and position embeddings (mmdet's query_feat
# and query_embed = our query_feat and query_pos) and the decoder's level embedding; the head's other norms (GroupNorm,
# LayerNorm) undecayed by norm_decay_mult. The pixel decoder's level embedding (mmdet's level_encoding, which no mmseg
# key names) keeps the full rate and decay: its key, longer than level_embed, is matched first.
depths = (2, 2, 6, 2)
backbone_norm = dict(lr_mult=0.1, decay_mult=0.0)
embed = dict(lr_mult=1.0, decay_mult=0.0)
custom_keys = {'backbone': dict(lr_mult=0.1, decay_mult=1.0), 'backbone.patch_embed.norm': backbone_norm,
               'backbone.out_norms': backbone_norm, 'pos_bias.table': backbone_norm,
               'query_feat': embed, 'query_pos': embed, 'level_embed': embed,
               'pixel_decoder.level_embed': dict(lr_mult=1.0, decay_mult=1.0)}
custom_keys.update({f'backbone.layers.{stage}.blocks.{block}.norm': backbone_norm
                    for stage, blocks in enumerate(depths) for block in range(blocks)})
custom_keys.update({f'backbone.layers.{stage}.downsample.norm': backbone_norm for stage in range(1, len(depths))})
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2),
    paramwise_cfg=dict(custom_keys=custom_keys, norm_decay_mult=0.0))
param_scheduler = [dict(type='PolyLR', power=0.9, eta_min=0.0, by_epoch=False, begin=0, end=160000)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=5000)
default_hooks = dict(checkpoint=dict(interval=5000, save_best='mIoU'))
