# LoRA fine-tune of DPT with an 8-block ViT-S/16 on CamVid, sized for a CPU: rank-4 adapters on every block's q/k/v
# and output projection, the rest of the backbone frozen; a narrow neck ('add' readout, no projection weights) and
# the head are trained: under 3% of the parameters. 160x120 images, 80 iterations (a few minutes on 2 cores).
# Fine-tune a pretrained encoder by giving its file (timm or zoo layout; the adapters are added after it loads):
#   python tools/train.py configs/dpt_vits_lora_camvid_cpu.py --data-root ../shared/data/camvid \
#       --cfg-options model.backbone.pretrained=checkpoints/vit_small_patch16_224.safetensors
# The console prints the trained share and the adapter file's size at the start; the adapters are written alone to
# <work_dir>/lora_adapters.safetensors (zoo.lora.load_adapters reads them back).
_base_ = ['dpt_vitb_camvid.py']
max_iters = 80
model = dict(
    backbone=dict(name='vit_small_patch16_224', depth=8, out_indices=(1, 3, 5, 7), drop_path_rate=0.0,
                  lora=dict(rank=4, alpha=8, dropout=0.0, targets=['*.attn.qkv', '*.attn.proj'])),
    neck=dict(readout='add', hidden_channels=(16, 32, 64, 64), fusion_channels=32),
    decode_head=dict(in_channels=32, dropout=0.0))
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(160, 120), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(96, 128), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='Resize', scale=(160, 120), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
predict_scale = (160, 120)
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=10),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=10, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_iters, max_keep_ckpts=1))
