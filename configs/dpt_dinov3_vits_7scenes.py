# DINOv3 ViT-S/16 + DPT metric depth on 7-Scenes (kitchen): the DINOv3 paper's depth setting (a DPT head on the frozen
# backbone's features) scaled to this data. The encoder is tapped after blocks 2/5/8/11 through its final norm
# (tap_norm, as the paper's dense evaluations read normed patch features), DINOv3's RoPE takes any grid (640x480 frames
# are a 40x30 grid, no position table to resample); CLS and the 4 registers enter the readout ('project' reads CLS).
# Frozen: the backbone's learning rate is 0 (lr_mult) so only the neck and head train.
# Give the DINOv3 weights as a local file in timm's, transformers' (save_pretrained folder) or the official layout:
#   python tools/train.py configs/dpt_dinov3_vits_7scenes.py --data-root ../shared/data/depth-7scenes \
#       --cfg-options model.backbone.pretrained=dinov3_vits16_pretrain_lvd1689m.pth
_base_ = ['_base_/models/dpt_vit-b16_depth.py', '_base_/datasets/seven_scenes.py', '_base_/schedules/schedule_short.py',
          '_base_/default_runtime.py']
model = dict(
    data_preprocessor=dict(size_divisor=16),
    backbone=dict(name='vit_small_patch16_dinov3', out_indices=(2, 5, 8, 11), tap_norm=True, drop_path_rate=0.0),
    neck=dict(hidden_channels=(48, 96, 192, 384)))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.0, decay_mult=0.0)}))
