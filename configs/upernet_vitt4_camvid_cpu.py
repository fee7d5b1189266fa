# UperNet on CamVid sized for a CPU, beside configs/dpt_vitt4_camvid_cpu.py (the same data, schedule and backbone):
# ViT-Ti with 4 blocks (from scratch) through the simple feature pyramid (its last map deconvolved to strides 4 and
# 8, kept at 16, max-pooled to 32; 64 wide), a 64-wide UPerHead and the FCN auxiliary head on the stride-16 level.
# The heads take their input widths from the neck, so tools/compare.py can swap the backbone (a hierarchical one's
# stage maps go to the heads as they are):
#   python tools/train.py configs/upernet_vitt4_camvid_cpu.py --data-root ../shared/data/camvid
#   python tools/compare.py --heads --configs configs/dpt_vitt4_camvid_cpu.py configs/upernet_vitt4_camvid_cpu.py \
#       --backbones vit_tiny_patch16_224:'{"depth": 4}' cvt_13_224 swin_tiny_patch4_window7_224 --seeds 3
_base_ = ['dpt_vitt4_camvid_cpu.py']
model = dict(
    neck=dict(_delete_=True, type='PyramidLevels', out_channels=64, out_strides=(4, 8, 16, 32)),
    decode_head=dict(_delete_=True, type='UPerHead', num_classes={{_base_.num_classes}}, channels=64,
                     pool_scales=(1, 2, 3, 6), dropout=0.1, init='mmseg'),
    auxiliary_head=dict(_delete_=True, type='FCNHead', num_classes={{_base_.num_classes}}, channels=32, num_convs=1,
                        in_index=2, dropout=0.1, init='mmseg'),
    aux_weight=0.4)
