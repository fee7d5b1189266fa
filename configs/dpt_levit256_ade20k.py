# DPT with a LeViT-256 backbone on ADE20K: dpt_vitb_ade20k_ours.py with only the backbone swapped.
# Levels (the backbone's default): stage 1 (stride 16) taken twice, then stages 2 and 3 (strides 32/64); widths
# 256/256/384/512, resampled x4/x2/x2/x2 by the neck to 4/8/16/32. No prefix tokens, so 'project' reads nothing.
# timm ImageNet weights (linear or 1x1-conv layout) from a local file:
#   --cfg-options model.backbone.pretrained=checkpoints/levit_256.fb_dist_in1k.safetensors
# The attention-bias tables are resampled to each input's grid, so 512x512 crops need no rebuild.
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='levit_256', pretrained=None,
                           drop_path_rate=0.0))
