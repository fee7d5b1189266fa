# DPT with a CrossViT-S backbone on ADE20K: dpt_vitb_ade20k_ours.py with only the backbone swapped.
# Levels: the three multi-scale blocks plus the last again; each level concatenates the small-patch branch
# (resampled onto the large-patch grid) with the large-patch branch, 192 + 384 channels at nominal stride 16,
# resampled x4/x2/x1/x0.5 by the neck as for ViT-B/16. 'project' readout reads both branches' CLS tokens.
# Pretrained weights from a local file in timm's or the official (IBM/CrossViT) layout:
#   --cfg-options model.backbone.pretrained=checkpoints/crossvit_small_240.in1k.safetensors
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='crossvit_small_240', pretrained=None,
                           drop_path_rate=0.1))
