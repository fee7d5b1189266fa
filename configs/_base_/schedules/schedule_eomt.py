# EoMT's optimisation (tue-mps/eomt training/lightning_module.py configure_optimizers, two_stage_warmup_poly_schedule.py
# and main.py's trainer defaults): AdamW 1e-4, weight decay 0.05 on every parameter; layer-wise decay 0.8 from the
# last block down (the last block and the encoder's final norm at 1e-4, the patch embedding and tokens with the first
# block, the new parameters at 1e-4); mixed precision (Lightning's '16-mixed': fp16 autocast with a dynamic loss
# scale); gradients clipped to a norm of 0.01; batch 16 (the README: devices x batch_size = 16). A config sets the
# run's length, the scheduler (TwoStageWarmupPolyLR: the new parameters warm up over 500 steps while the backbone
# waits, the backbone over the next 1000, then each decays as (1 - progress) ** 0.9 to the run's end) and the
# MaskAnnealingHook.
effective_batch_size = 16
optim_wrapper = dict(
    type='AutocastOptimWrapper', dtype='float16',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.8, backbone='backbone', layer_decay_style='eomt', decay_every_param=True),
    clip_grad=dict(max_norm=0.01, norm_type=2))
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
