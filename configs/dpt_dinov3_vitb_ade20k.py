# DINOv3 ViT-B/16 + DPT segmentation on ADE20K, 512x512 crops, the ViT-B DPT config's schedule: the DINOv3
# dense-evaluation setting (DPT head on the frozen backbone; lr_mult 0) with taps after blocks 2/5/8/11 through the
# final norm. DINOv3's RoPE takes any grid, so the 512 crops and the test images' sizes need no resampled table.
#   python tools/train.py configs/dpt_dinov3_vitb_ade20k.py --data-root /data/ade \
#       --cfg-options model.backbone.pretrained=dinov3_vitb16_pretrain_lvd1689m.pth
_base_ = ['dpt_vitb_ade20k_ours.py']
model = dict(
    data_preprocessor=dict(size_divisor=16),
    backbone=dict(name='vit_base_patch16_dinov3', out_indices=(2, 5, 8, 11), tap_norm=True, drop_path_rate=0.0))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.0, decay_mult=0.0)}))
