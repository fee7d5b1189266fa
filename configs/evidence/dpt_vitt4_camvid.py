# Evidence runs (docs/evidence.md, claims a and c): configs/dpt_vitt4_camvid_cpu.py shrunk to a few minutes on
# one thread (OMP_NUM_THREADS=1): 128x160 crops, batch 4, 120 iterations, one validation at the end.
#   python tools/evidence.py inductive_bias --seeds 3 --jobs 2 --out docs/evidence/inductive_bias
_base_ = ['../dpt_vitt4_camvid_cpu.py']
max_iters = 120
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(240, 180), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(128, 160), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(batch_size=4, dataset=dict(pipeline=train_pipeline, fraction=1.0, fraction_seed=0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=10),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=10, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_iters, max_keep_ckpts=1))
