# mmseg's DPT ViT-B schedule: AdamW 6e-5, no decay on position/CLS/norms, linear warm-up over 1500 iterations
# from 1e-6 of the rate, then poly decay (power 1) to iteration 160k. The recipe's batch is 16 = 8 processes x 2:
# on fewer processes gradients are accumulated to 16 and the iteration counts below are optimizer steps
# (heads/engine/distributed/effective_batch.py; the log says how at the start). SyncBN across processes on GPUs.
effective_batch_size = 16
sync_bn = 'torch'
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(custom_keys={'pos_embed': dict(decay_mult=0.0), 'prefix': dict(decay_mult=0.0),
                                    'norm': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500, end=160000),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(enable=False, base_batch_size=16)
