# DPT ViT-B/16 on CamVid: the ADE20K experiment with the CamVid dataset part (and its class count).
_base_ = ['_base_/models/dpt_vit-b16.py', '_base_/datasets/camvid.py', '_base_/schedules/schedule_160k.py',
          '_base_/default_runtime.py']
model = dict(decode_head=dict(num_classes={{_base_.num_classes}}))
