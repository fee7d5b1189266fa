# mmseg's UperNet Swin-T recipe on ADE20K, key by key (mmsegmentation 1.x
# swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512, the 0.x upernet_swin_tiny_patch4_window7_512x512_
# 160k_ade20k_pretrain_224x224_1K: 44.41 mIoU single-scale after 160k iterations at batch 16;
# tests/layouts/test_upernet_mmseg.py holds the table).
#   python tools/train.py configs/upernet_swint_ade20k.py --data-root /data/ade           (1 GPU: 8 x 2 accumulated)
#   torchrun --nproc_per_node 8 tools/train.py configs/upernet_swint_ade20k.py --launcher pytorch   (8 GPUs x 2, SyncBN)
# mmseg's UperNet Swin checkpoints load as they are (heads/layouts/mmseg_upernet.py), e.g.
#   python tools/test.py configs/upernet_swint_ade20k.py upernet_swin_tiny_..._20210531_112542-e380ad3e.pth
_base_ = ['_base_/models/upernet_swin-t_mmseg.py', '_base_/datasets/ade20k.py', '_base_/schedules/schedule_160k.py',
          '_base_/default_runtime.py']
model = dict(data_preprocessor=dict(size={{_base_.crop_size}}),  # training batches padded to the 512 crop
             decode_head=dict(num_classes={{_base_.num_classes}}),
             auxiliary_head=dict(num_classes={{_base_.num_classes}}))
# AdamW 6e-5, betas (0.9, 0.999), weight decay 0.01 except on mmseg's custom keys: 'absolute_pos_embed' (no such
# table: use_abs_pos_embed=False), 'relative_position_bias_table' (ours: attn.pos_bias.table) and 'norm' (every
# LayerNorm of the Swin, named norm* in both; the heads' BatchNorms are 'bn' in both, so they are decayed).
optim_wrapper = dict(paramwise_cfg=dict(custom_keys=dict(_delete_=True, pos_bias=dict(decay_mult=0.0),
                                                         norm=dict(decay_mult=0.0))))
