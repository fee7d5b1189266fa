# Video Depth Anything ViT-S relative depth on 7-Scenes (kitchen) sized for a CPU: the recipe of
# video_depth_anything_vits_7scenes_relative.py (temporal modules in the neck, the authors' VideoDepthLoss on clips)
# with the CPU sizes of depth_anything_v2_vits_7scenes_relative_cpu.py: the full ViT-S/14 architecture from scratch,
# 168x126 frames, 8 frames an iteration (two clips of 4 consecutive frames, each clip flipped alike), the encoder at
# the head's learning rate; validated on the 40 validation frames in clips of 4. tools/short_runs.py's `vda` run (this
# config for 40 iterations, 2 threads on a busy 2-core Xeon with AMX, 654 s): val AbsRel 0.185 (d1 0.643) after
# scale-and-shift alignment in disparity, against 0.280 for the mean depth so aligned (tools/depth_baseline.py).
#   python tools/train.py configs/video_depth_anything_vits_7scenes_relative_cpu.py \
#       --data-root ../shared/data/depth-7scenes
_base_ = ['video_depth_anything_vits_7scenes_relative.py']
frames = 4
max_iters = 200
train_pipeline = [dict(type='LoadImage'), dict(type='LoadAnnotations', seg=False, depth=True),
                  dict(type='RandomResize', scale=(168, 126), keep_ratio=True), dict(type='RandomFlip', prob=0.5),
                  dict(type='PackDenseInputs')]
test_pipeline = [dict(type='LoadImage'), dict(type='Resize', scale=(168, 126), keep_ratio=True),
                 dict(type='LoadAnnotations', seg=False, depth=True), dict(type='PackDenseInputs')]
model = dict(frames=frames)
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(frames=frames, dataset=dict(pipeline=train_pipeline)))
val_dataloader = dict(num_workers=0, persistent_workers=False,
                      dataset=dict(frames=frames, dataset=dict(pipeline=test_pipeline)))
test_dataloader = val_dataloader
predict_scale = (168, 126)
optim_wrapper = dict(optimizer=dict(lr=1e-3), paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=1.0)}))
param_scheduler = [dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
                   dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=max_iters)]
train_cfg = dict(max_iters=max_iters, val_interval=100)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=100, max_keep_ckpts=2))
