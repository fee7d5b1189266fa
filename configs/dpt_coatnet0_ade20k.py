# DPT with a CoAtNet-0 backbone on ADE20K: dpt_vitb_ade20k_ours.py with only the backbone swapped.
# Levels: the four stages at strides 4/8/16/32 (MBConv, MBConv, transformer, transformer), widths 96-768;
# the neck only projects them (no resampling). No prefix tokens, so 'project' readout reads nothing.
# coatnet_0_rw_224 is the variant with timm ImageNet weights; load them from a local file:
#   --cfg-options model.backbone.pretrained=checkpoints/coatnet_0_rw_224.sw_in1k.safetensors
# Its relative position biases are resized to each input's grid, so 512x512 crops need no rebuild.
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='coatnet_0_rw_224', pretrained=None,
                           drop_path_rate=0.1))
