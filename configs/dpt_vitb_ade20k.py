# mmseg's DPT ViT-B/16 recipe on ADE20K, key by key (mmsegmentation 1.2.2 dpt_vit-b16_8xb2-160k_ade20k-512x512:
# 46.97 mIoU single-scale after 160k iterations at batch 16; tests/layouts/test_mmseg_recipe.py holds the table).
# Start from the ImageNet-21k -> 1k ViT-B/16 weights (docs/dense.md, "mmseg's DPT ViT-B recipe": how to make the file).
#   python tools/train.py configs/dpt_vitb_ade20k.py --data-root /data/ade                  (1 GPU: 8 x 2 accumulated)
#   torchrun --nproc_per_node 8 tools/train.py configs/dpt_vitb_ade20k.py --launcher pytorch   (8 GPUs x 2, SyncBN)
# mmseg's published checkpoint evaluates here too (its ViT was trained with a patch-embedding bias):
#   python tools/test.py configs/dpt_vitb_ade20k.py dpt_vit-b16_512x512_160k_ade20k-db31cf52.pth \
#       --cfg-options model.backbone.patch_bias=True
# configs/dpt_vitb_ade20k_ours.py: this project's choices where they differ, and why.
_base_ = ['_base_/models/dpt_vit-b16_mmseg.py', '_base_/datasets/ade20k.py', '_base_/schedules/schedule_160k.py',
          '_base_/default_runtime.py']
model = dict(data_preprocessor=dict(size={{_base_.crop_size}}),  # training batches padded to the 512 crop
             decode_head=dict(num_classes={{_base_.num_classes}}))
# AdamW without decay on the position table and the CLS token (prefix.cls) only: mmseg's third key, 'norm', names
# no parameter of its ViT (its norms are ln1/ln2), so its LayerNorms and BatchNorms are decayed.
optim_wrapper = dict(paramwise_cfg=dict(custom_keys=dict(_delete_=True, pos_embed=dict(decay_mult=0.0),
                                                         prefix=dict(decay_mult=0.0))))
