# DPT ViT-B/16 on ADE20K, mmseg's recipe (46.97 mIoU single-scale at 160k iterations, batch 16).
#   python tools/train.py configs/dpt_vitb_ade20k.py --data-root /data/ade
#   torchrun --nproc_per_node 8 tools/train.py configs/dpt_vitb_ade20k.py --launcher pytorch   (batch 16)
_base_ = ['_base_/models/dpt_vit-b16.py', '_base_/datasets/ade20k.py', '_base_/schedules/schedule_160k.py',
          '_base_/default_runtime.py']
model = dict(decode_head=dict(num_classes={{_base_.num_classes}}))
