# A short schedule for CPU-sized runs and quick comparisons: AdamW, linear warm-up, poly decay.
max_iters = 2000
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(custom_keys={'pos_embed': dict(decay_mult=0.0), 'prefix': dict(decay_mult=0.0),
                                    'norm': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=100, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
