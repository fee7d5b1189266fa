# DPT ViT-B/16 on ADE20K with this project's own choices where they differ from mmseg's recipe
# (configs/dpt_vitb_ade20k.py; same data, schedule, optimizer, batch 16 and SyncBN). The backbone experiments
# (dpt_cvt13/coatnet0/crossvits_ade20k.py) and CamVid (dpt_vitb_camvid.py) are this config with one part swapped.
# Where it differs, and why (docs/dense.md, "mmseg's DPT ViT-B recipe (ADE20K), and ours"):
#   cross-entropy averaged over labelled pixels (mmseg: over all pixels, padding and void included);
#   test-time padding cut off the logits (mmseg stretches the padded input's logits onto the image);
#   no weight decay on the ViT's LayerNorms (mmseg's comment asks for it, its 'norm' key matches nothing);
#   the pretrained ViT as it was trained (patch-embedding bias, LayerNorm eps 1e-6), drop_path 0.1;
#   batches padded to a multiple of 32 (mmseg: to the 512 crop); logits upsampled x2 in the head (official DPT);
#   fusion units without BatchNorm and PyTorch's init (the base every earlier experiment here used).
#   python tools/train.py configs/dpt_vitb_ade20k_ours.py --data-root /data/ade \
#       --cfg-options model.backbone.pretrained=checkpoints/vit_base_patch16_224.orig_in21k_ft_in1k.safetensors
_base_ = ['_base_/models/dpt_vit-b16.py', '_base_/datasets/ade20k.py', '_base_/schedules/schedule_160k.py',
          '_base_/default_runtime.py']
model = dict(decode_head=dict(num_classes={{_base_.num_classes}}))
