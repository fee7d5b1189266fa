# DPT with a CvT-13 backbone on ADE20K: dpt_vitb_ade20k_ours.py with only the backbone swapped.
# Levels: stages 1-3 at strides 4/8/16 plus stage 3 again, which the neck resamples x0.5 to stride 32.
# CvT's CLS token exists in the last stage only, so the neck reads no prefix tokens ('project' becomes 'ignore').
# Pretrained weights from a local transformers folder (microsoft/cvt-13 save_pretrained) or an official .pth:
#   --cfg-options model.backbone.pretrained=checkpoints/cvt-13
_base_ = ['./dpt_vitb_ade20k_ours.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='cvt_13_224', pretrained=None,
                           drop_path_rate=0.1))
