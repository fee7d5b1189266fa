# Depth Anything V2 ViT-S metric depth on 7-Scenes (kitchen) sized for a CPU: the full ViT-S/14 architecture from
# scratch, 168x126 images (a 12x9 patch grid), batch 8, 200 iterations (validated at 100 and 200), the encoder at
# the head's learning rate (no pretrained encoder to keep). Measured on a 2-core Xeon with OMP_NUM_THREADS=1 beside
# other jobs (40 minutes there; docs/benchmarks/depth_recipes_intel_xeon.md): val AbsRel 0.226 at 100 iterations,
# 0.220 at 200 (d1 0.688, RMSE 0.357) against 0.3225 (d1 0.672, RMSE 0.513) for the training-mean depth
# predicted everywhere (tools/depth_baseline.py).
#   python tools/train.py configs/depth_anything_v2_vits_7scenes_cpu.py --data-root ../shared/data/depth-7scenes
_base_ = ['depth_anything_v2_vits_7scenes.py']
max_iters = 200
train_pipeline = [dict(type='LoadImage'), dict(type='LoadAnnotations', seg=False, depth=True),
                  dict(type='RandomResize', scale=(168, 126), keep_ratio=True), dict(type='RandomFlip', prob=0.5),
                  dict(type='PackDenseInputs')]
test_pipeline = [dict(type='LoadImage'), dict(type='Resize', scale=(168, 126), keep_ratio=True),
                 dict(type='LoadAnnotations', seg=False, depth=True), dict(type='PackDenseInputs')]
train_dataloader = dict(batch_size=8, num_workers=0, persistent_workers=False, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
predict_scale = (168, 126)
optim_wrapper = dict(optimizer=dict(lr=1e-3), paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=1.0)}))
param_scheduler = [dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
                   dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=max_iters)]
train_cfg = dict(max_iters=max_iters, val_interval=100)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=100, max_keep_ckpts=2))
