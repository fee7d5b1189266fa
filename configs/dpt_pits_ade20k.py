# DPT with a PiT-S backbone on ADE20K: dpt_vitb_ade20k_ours.py with only the backbone swapped.
# Levels (the backbone's default): stage 1 at stride 8 taken twice (its 2s-patch map moved onto the stride grid, see
# zoo.backbones.pit), then stages 2 and 3 at strides 16/32; widths 144/144/288/576, resampled x2/x1/x1/x1 by the
# neck to 4/8/16/32. Each level carries the CLS token, which the 'project' readout reads.
# timm ImageNet weights from a local file:
#   --cfg-options model.backbone.pretrained=checkpoints/pit_s_224.in1k.safetensors
# The position table is resampled to each input's grid, so 512x512 crops need no rebuild.
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='pit_s_224', pretrained=None,
                           drop_path_rate=0.1))
