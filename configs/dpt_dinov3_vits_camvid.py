# DINOv3 ViT-S/16 + DPT segmentation on CamVid: the DINOv3 dense-evaluation setting (a DPT head on the frozen
# backbone) on this data. Taps after blocks 2/5/8/11 through the final norm (tap_norm); DINOv3's RoPE takes any grid;
# the backbone's learning rate is 0 (frozen), the neck and head train. Weights: a local file in timm's,
# transformers' or the official layout:
#   python tools/train.py configs/dpt_dinov3_vits_camvid.py --data-root ../shared/data/camvid \
#       --cfg-options model.backbone.pretrained=dinov3_vits16_pretrain_lvd1689m.pth
_base_ = ['dpt_vitb_camvid.py']
model = dict(
    data_preprocessor=dict(size_divisor=16),
    backbone=dict(name='vit_small_patch16_dinov3', out_indices=(2, 5, 8, 11), tap_norm=True, drop_path_rate=0.0),
    neck=dict(hidden_channels=(48, 96, 192, 384)))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.0, decay_mult=0.0)}))
