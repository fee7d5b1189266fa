# DPT with a Swin-T backbone on ADE20K: dpt_vitb_ade20k_ours.py with only the backbone swapped.
# Levels: the four stages at strides 4/8/16/32, widths 96-768, each through its own LayerNorm (as mmseg's Swin);
# the neck only projects them (no resampling). No prefix tokens, so 'project' readout reads nothing.
# 512x512 crops: stage maps 128/64/32/16 are padded to window (7) multiples inside each block and cropped back.
# timm's or the official (microsoft/Swin-Transformer) ImageNet weights from a local file:
#   --cfg-options model.backbone.pretrained=checkpoints/swin_tiny_patch4_window7_224.ms_in1k.safetensors
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='swin_tiny_patch4_window7_224', pretrained=None,
                           drop_path_rate=0.2))
