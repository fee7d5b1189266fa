# DPT-Hybrid (Ranftl et al. 2021) on ADE20K: dpt_vitb_ade20k_ours.py with the backbone swapped for timm's R50 + ViT-B/16
# hybrid (zoo.backbones.vit_hybrid) and the neck widths of the official DPT-Hybrid. The paper reports 49.02 mIoU
# (ADE20K val, single scale) for DPT-Hybrid, against 47.63 for DPT-Large.
# Levels (the backbone's default): BiT ResNet stages 1 and 2 (256/512 channels, strides 4/8), which enter the fusion
# as they are (plain_levels, no readout/projection/resampling, as in the official code), then blocks 8 and 11
# (768 channels, stride 16) with 'project' readout, projected to 768 and resampled x1/x0.5 to strides 16/32.
# What stays ours (the base config): fusion units without BatchNorm (the official ADE model has it), the schedule.
# timm ImageNet weights from a local file (the position table is resampled to each input's grid):
#   --cfg-options model.backbone.pretrained=checkpoints/vit_base_r50_s16_384.orig_in21k_ft_in1k.safetensors
# The released model (isl-org/DPT dpt_hybrid-ade20k-*.pt) loads with heads.models.dpt_official.load_official_dpt into
# dpt_hybrid_config('ade20k').
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='vit_base_r50_s16_384', pretrained=None,
                           drop_path_rate=0.1),
             neck=dict(hidden_channels=(256, 512, 768, 768), plain_levels=(0, 1)))
